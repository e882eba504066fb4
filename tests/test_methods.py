"""Decorated methods, class methods and static methods, through the instance and the class.

``obj.f.grad(x)`` differentiates the arguments after ``obj`` (``argnums`` counts from the
first of them, as for JAX's grad of a bound method); ``type(obj).f.grad(obj, x)``
differentiates ``obj``'s own floats too. Expected values are derived by hand or compared
with central finite differences (``check_grads``).
"""
import enum
import inspect
import math
import sys
from dataclasses import dataclass

import pytest

import astad
from astad.testing import check_grads


@dataclass
class Spring:
    k: float
    rest: float = 1.0

    @astad.reverse_diff
    def energy(self, x):
        """Elastic energy at length x."""
        d = x - self.rest
        return 0.5 * self.k * d * d

    @astad.reverse_diff(argnums=1)
    def work(self, x, y):
        return self.k * x * math.sin(y)

    @astad.reverse_diff(argnums=(-1, 0))
    def mixed(self, a, b, c):
        return a * b * c * self.k

    @astad.reverse_diff
    def chain(self, n, x):  # recursion through the instance
        if n == 0:
            return x
        return self.k * self.chain(n - 1, x)

    @classmethod
    @astad.reverse_diff
    def scaled_above(cls, x):
        return cls.scale * x * x

    @astad.reverse_diff
    @classmethod
    def scaled_below(cls, x):
        return cls.scale * x * x * x

    @staticmethod
    @astad.reverse_diff
    def cube_above(x):
        return x * x * x

    @astad.reverse_diff
    @staticmethod
    def cube_below(x):
        return 2.0 * x * x * x

    scale = 3.0


class StiffSpring(Spring):
    scale = 10.0  # cls is the class the method is reached through


def test_method_through_the_instance_differentiates_the_arguments():
    spring = Spring(4.0, rest=1.5)
    assert spring.energy(2.0) == 0.5 * 4.0 * 0.25
    assert spring.energy.grad(2.0) == 4.0 * 0.5  # k (x - rest), a float: one parameter
    value, grad = spring.energy.value_and_grad(2.0)
    assert (value, grad) == (0.5, 2.0)
    value, pullback = spring.energy.vjp(2.0)
    assert value == 0.5 and pullback(3.0) == 6.0
    assert spring.k == 4.0 and spring.rest == 1.5  # the object is left as it was


def test_method_through_the_class_differentiates_self_as_a_dataclass():
    spring = Spring(4.0, rest=1.5)
    d_self, d_x = Spring.energy.grad(spring, 2.0)
    assert isinstance(d_self, Spring)  # a gradient has the structure of its argument
    assert d_self.k == 0.5 * 0.25 and d_self.rest == -4.0 * 0.5 and d_x == 2.0
    assert Spring.energy(spring, 2.0) == spring.energy(2.0)
    assert type(spring).energy.grad(spring, 2.0) == (d_self, d_x)
    check_grads(Spring.energy, spring, 2.0)
    check_grads(spring.energy, 2.0)


def test_argnums_count_as_the_call_is_written():
    spring = Spring(2.0)
    # argnums=1 on work(self, x, y): through the instance y, through the class x
    assert spring.work.grad(3.0, 0.5) == pytest.approx(2.0 * 3.0 * math.cos(0.5))
    assert Spring.work.grad(spring, 3.0, 0.5) == pytest.approx(2.0 * math.sin(0.5))
    # argnums=(-1, 0): c then a, from the end of the arguments after self
    assert spring.mixed.grad(2.0, 3.0, 5.0) == (2.0 * 3.0 * 2.0, 3.0 * 5.0 * 2.0)
    with pytest.raises(astad.InputError, match="argnums 1 refers to positional argument 1.*"
                                               "passes 1 positional arguments after"):
        spring.work.grad(3.0)
    with pytest.raises(TypeError, match="missing a required argument: 'x'"):
        spring.energy.grad()


def test_recursive_method_and_its_gradient():
    spring = Spring(1.5)
    n, x = 5, 0.7
    assert spring.chain(n, x) == pytest.approx(1.5 ** n * x)
    assert spring.chain.grad(n, x) == (None, pytest.approx(1.5 ** n))  # an int: None
    d_self, d_n, d_x = Spring.chain.grad(spring, n, x)
    assert d_self.k == pytest.approx(n * 1.5 ** (n - 1) * x) and d_x == pytest.approx(1.5 ** n)


def test_classmethods_and_staticmethods_either_side_of_the_decorator():
    for cls in (Spring, StiffSpring):
        assert cls.scaled_above(2.0) == cls.scale * 4.0
        assert cls.scaled_above.grad(2.0) == cls.scale * 4.0
        assert cls.scaled_below.grad(2.0) == cls.scale * 12.0
        assert cls(1.0).scaled_above.grad(2.0) == cls.scale * 4.0  # through an instance
        assert cls(1.0).scaled_below.value_and_grad(2.0) == (cls.scale * 8.0, cls.scale * 12.0)
    for f in (Spring.cube_above, Spring(1.0).cube_above):
        assert f(2.0) == 8.0 and f.grad(2.0) == 12.0
    for f in (Spring.cube_below, Spring(1.0).cube_below):
        assert f(2.0) == 16.0 and f.grad(2.0) == 24.0
    # nothing of astad's stays in the class
    assert "__astad_methods__" not in vars(Spring)
    assert isinstance(vars(Spring)["cube_above"], staticmethod)


def test_a_bound_method_is_accepted():
    class Pendulum:
        def __init__(self, length):
            self.length = length

        def height(self, angle):
            return self.length * (1.0 - math.cos(angle))

    pendulum = Pendulum(2.0)
    height = astad.reverse_diff(pendulum.height)
    assert height(0.3) == pendulum.height(0.3)
    assert height.grad(0.3) == pytest.approx(2.0 * math.sin(0.3))
    # a decorated method's bound object, with other options
    work = astad.reverse_diff(Spring(2.0).work, argnums=0)
    assert work.grad(3.0, 0.5) == pytest.approx(2.0 * math.sin(0.5))
    assert astad.reverse_diff(Spring.scaled_above).grad(1.0) == 6.0  # bound to the class


def test_bound_object_is_a_bound_method():
    spring = Spring(2.0)
    bound = spring.energy
    assert isinstance(bound, type(Spring(1.0).__init__))  # types.MethodType
    assert bound.__self__ is spring and bound.__func__.__code__ is Spring.energy.__code__
    assert bound.__name__ == "energy" and bound.__qualname__ == "Spring.energy"
    assert str(inspect.signature(bound)) == "(x)"
    assert str(inspect.signature(Spring.energy)) == "(self, x)"
    assert Spring.energy.__doc__ == "Elastic energy at length x." == bound.__doc__
    assert "def energy(" in bound.source and bound.source == Spring.energy.source
    assert Spring.energy is Spring.energy  # through the class: the decorated function


def test_decorated_methods_called_from_differentiated_code():
    @astad.reverse_diff
    def total(springs, x):
        return sum(s.energy(x) + s.work(x, 0.5) for s in springs)

    springs = [Spring(2.0), Spring(3.0, rest=0.5)]
    d_springs, d_x = total.grad(springs, 1.2)
    expected_dx = sum(s.k * (1.2 - s.rest) + s.k * math.sin(0.5) for s in springs)
    assert d_x == pytest.approx(expected_dx)
    assert d_springs[1].k == pytest.approx(0.5 * 0.7 ** 2 + 1.2 * math.sin(0.5))
    check_grads(total, springs, 1.2)


def test_calling_a_decorated_method_adds_no_frame_per_recursion_level():
    def depth():
        frame, n = sys._getframe(1), 0
        while frame is not None:
            frame, n = frame.f_back, n + 1
        return n

    class Undecorated:
        def down(self, n):
            return depth() if n == 0 else self.down(n - 1)

    class Decorated:
        @astad.reverse_diff
        def down(self, n):
            return depth() if n == 0 else self.down(n - 1)

    assert Decorated().down(50) - Decorated().down(0) == 50
    assert Decorated().down(50) == Undecorated().down(50)


def test_deep_recursive_method_gradient_at_the_original_recursion_limit():
    class Chain:
        rate = 1.001

        @astad.reverse_diff
        def grow(self, x, n):
            if n == 0:
                return x
            return self.grow(x * self.rate, n - 1)

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(2000 + 50)
    try:
        depth = 2000 - 40
        chain = Chain()
        chain.grow(1.0, depth)  # the original runs at this limit ...
        assert chain.grow.grad(1.0, depth)[0] == pytest.approx(1.001 ** depth)  # ... and .grad
    finally:
        sys.setrecursionlimit(old)


def test_function_made_elsewhere_and_stored_in_a_class_body_binds_as_a_method():
    def make_energy(scale):
        def energy(self, x):
            return scale * self.k * x * x
        return energy

    class Body:
        k = 2.0
        energy = astad.reverse_diff(make_energy(3.0))

    assert Body().energy.grad(1.5) == 3.0 * 2.0 * 3.0
    assert Body.energy.grad(Body(), 1.5)[1] == 18.0


def test_methods_of_enums_and_subclasses_and_super():
    class Unit(enum.Enum):
        METRE = 1.0
        FOOT = 0.3048

        @astad.reverse_diff
        def area(self, x):
            return self.value * x * x

    assert [m.name for m in Unit] == ["METRE", "FOOT"]  # the method is no member
    assert Unit.FOOT.area.grad(2.0) == pytest.approx(0.3048 * 4.0)

    class Base:
        def __init__(self, k):
            self.k = k

        @astad.reverse_diff
        def energy(self, x):
            return self.k * x * x

    class Derived(Base):
        def energy(self, x):  # reaches the decorated method through super()
            return super().energy(x) + math.sin(x)

    @astad.reverse_diff(argnums=1)
    def total(body, x):
        return body.energy(x)

    assert total.grad(Derived(2.0), 0.5) == pytest.approx(2.0 + math.cos(0.5))
    assert StiffSpring(2.0).energy.grad(3.0) == 4.0  # an inherited decorated method


def test_setting_a_decorated_method_on_a_class_afterwards():
    class Plain:
        def __init__(self, k):
            self.k = k

        def f(self, x):
            return self.k * math.exp(x)

    Plain.f = astad.reverse_diff(Plain.f)
    assert Plain(2.0).f.grad(0.0) == 2.0
    assert Plain(2.0).f(0.0) == 2.0


def test_options_apply_through_the_instance():
    class Wave:
        def __init__(self, k):
            self.k = k

        @astad.reverse_diff(preaccumulate=False)
        def height(self, x):
            return self.k * math.sin(x) * x

    wave = Wave(2.0)
    assert wave.height.grad(0.5) == pytest.approx(2.0 * (math.cos(0.5) * 0.5 + math.sin(0.5)))
    assert wave.height.vjp(0.5)[1].tape_length == 3  # one entry per operation: *, sin, *
    spring = Spring(2.0)
    with pytest.raises(astad.InputError, match="keyword arguments are not differentiated"):
        spring.work.grad(3.0, y=0.5)  # argnums=1 chose y, passed by keyword: a constant


def test_forward_mode_and_function_transforms_of_bound_methods():
    spring = Spring(2.0, rest=1.5)
    value, tangent = spring.work.jvp((3.0, 0.5), (1.0, 0.0))  # k x sin(y), along x
    assert value == spring.work(3.0, 0.5) and tangent == pytest.approx(2.0 * math.sin(0.5))
    assert astad.grad(spring.energy)(2.0) == spring.energy.grad(2.0) == 1.0
    assert astad.hessian(spring.energy)(2.0) == pytest.approx(2.0)  # k
    assert astad.grad(Spring.energy, argnums=1)(spring, 2.0) == 1.0


class _SuperBase:
    def energy(self, x):
        return x * x


class _SuperModel(_SuperBase):
    k = 3.0

    @astad.reverse_diff
    def energy(self, x):
        return super().energy(x) * self.k


def test_a_decorated_method_calling_zero_argument_super():
    m = _SuperModel()
    assert m.energy(2.0) == 12.0
    assert m.energy.grad(2.0) == 12.0  # d/dx 3 x^2
    gradient = _SuperModel.energy.grad(m, 2.0)
    assert gradient[1] == 12.0
