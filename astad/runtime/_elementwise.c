/* Element-wise numpy operations on float64 arrays, recorded and swept in C.
 *
 * rules/array.py's element-wise rule is the reference: for the commonest ufuncs (add,
 * subtract, multiply, true_divide, negative, square, sqrt, exp, log, sin, cos, tanh, and
 * power with a number as exponent) on C-contiguous float64 arrays of one shape (or an
 * array and a number), ``elementwise`` computes what that rule computes and appends the
 * same tape entry,
 * ``(_elementwise_backward, parents, partials)``, with the same objects in it; the sweep
 * (_native.c) runs such an entry here when its cotangent and partials are plain arrays
 * of the parents' shape. Everything else (broadcasting, other dtypes, non-contiguous
 * views, a view whose root was written since it was read, duals of an enclosing
 * differentiation, a user's own rule for the ufunc, a result that is not finite) is left
 * to the Python rule, which gives the documented result or error: the fast path returns
 * NotImplemented (forward) or 0 (backward) before changing anything.
 *
 * Bits: add, subtract, multiply, divide, negate and square are exact IEEE operations, the
 * same in C as in numpy's loops (the build turns off floating-point contraction). Other
 * primals (sqrt, exp, log, sin, cos, tanh, power) and the partials that need a
 * transcendental function (cos for sin, sin for cos, x^(y - 1) for power) are computed by
 * numpy's own ufunc, so the values are numpy's, and numpy's warnings and errstate apply
 * to them. A result computed here
 * that is not finite goes to the Python rule, where numpy computes it (and warns).
 *
 * numpy's array struct is read through its public layout (PyArrayObject_fields: data,
 * nd, dimensions, strides, base, descr, flags), checked against a probe array when the
 * table is configured; the extension needs no numpy headers to build.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_native.h"
#include <structmember.h>
#include <math.h>
#include <fenv.h>


typedef struct { /* numpy's PyArrayObject_fields, as far as it is read here */
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
    int flags;
} ArrayFields;

#define NPY_C_CONTIGUOUS 0x0001
#define NPY_ALIGNED 0x0100
#define NPY_WRITEABLE 0x0400
/* where tanh's partial is 1 - r^2: the threshold of tanh's text in rules/scalar.py */
#define TANH_NEAR 3.0
#define MAX_SIZE 16384 /* larger arrays: the Python rule (its cost is not the overhead) */

enum { ADD, SUBTRACT, MULTIPLY, DIVIDE, NEGATIVE, SQUARE, SQRT, EXP, LOG, SIN, COS, TANH,
       POWER };
#define IS_BINARY(op) ((op) <= DIVIDE || (op) == POWER)

static struct {
    int ready;
    PyTypeObject *dual;          /* ArrayDual */
    Py_ssize_t v, i, t, root, from_root, synced; /* its slots' offsets */
    PyTypeObject *ndarray;
    PyObject *float64;           /* np.dtype("float64") */
    PyTypeObject *float64_scalar; /* np.float64 */
    PyObject *running;           /* duals.running: .depth holds id(tape) of running tapes */
    PyObject *rules;             /* ARRAY_RULES */
    PyObject *table;             /* ufunc -> (op, its rule when configured, helper,
                                  * whether its partials are checked for inf and nan) */
    PyObject *backward;          /* rules.array._elementwise_backward */
    PyObject *non_finite;        /* rules.array.NonFinite */
    PyObject *shape;             /* the last shape tuple made (parents share it) */
} ew;

#define SLOT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))

/* obj as a C-contiguous, aligned, native float64 ndarray (writeable if asked), or NULL */
static inline ArrayFields *
plain_array(PyObject *obj, int writeable)
{
    if (Py_TYPE(obj) != ew.ndarray)
        return NULL;
    ArrayFields *a = (ArrayFields *)obj;
    int need = NPY_C_CONTIGUOUS | NPY_ALIGNED | (writeable ? NPY_WRITEABLE : 0);
    if ((a->flags & need) != need || a->descr != ew.float64 || a->nd < 1 || a->nd > 32)
        return NULL;
    return a;
}

static inline Py_ssize_t
size_of(ArrayFields *a)
{
    Py_ssize_t n = 1;
    for (int d = 0; d < a->nd; d++)
        n *= a->dimensions[d];
    return n;
}

static inline int
same_shape(ArrayFields *a, ArrayFields *b)
{
    if (a->nd != b->nd)
        return 0;
    for (int d = 0; d < a->nd; d++)
        if (a->dimensions[d] != b->dimensions[d])
            return 0;
    return 1;
}

/* a number numpy takes as a float64 with the same value: float, np.float64, or an int of
 * at most 2**53 in size (converted exactly) */
static inline int
plain_number(PyObject *obj, double *out)
{
    if (PyFloat_CheckExact(obj) || Py_TYPE(obj) == ew.float64_scalar) {
        *out = PyFloat_AS_DOUBLE(obj);
        return 1;
    }
    if (PyLong_CheckExact(obj)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred()) || v > (1LL << 53) || v < -(1LL << 53)) {
            PyErr_Clear();
            return 0;
        }
        *out = (double)v;
        return 1;
    }
    return 0;
}

static int
all_finite(const double *x, Py_ssize_t n)
{
    for (Py_ssize_t j = 0; j < n; j++)
        if (!isfinite(x[j]))
            return 0;
    return 1;
}

/* the shape tuple of a, the previous one when equal (parents of one shape share it) */
static PyObject *
shape_of(ArrayFields *a)
{
    PyObject *last = ew.shape;
    if (last != NULL && PyTuple_GET_SIZE(last) == a->nd) {
        int d = 0;
        for (; d < a->nd; d++)
            if (PyLong_AsSsize_t(PyTuple_GET_ITEM(last, d)) != a->dimensions[d])
                break;
        if (d == a->nd)
            return Py_NewRef(last);
    }
    PyObject *shape = PyTuple_New(a->nd);
    if (shape == NULL)
        return NULL;
    for (int d = 0; d < a->nd; d++) {
        PyObject *size = PyLong_FromSsize_t(a->dimensions[d]);
        if (size == NULL) {
            Py_DECREF(shape);
            return NULL;
        }
        PyTuple_SET_ITEM(shape, d, size);
    }
    Py_XSETREF(ew.shape, Py_NewRef(shape));
    return shape;
}

static PyObject *
copy_of(PyObject *array)
{
    static PyObject *name = NULL;
    if (name == NULL && (name = PyUnicode_InternFromString("copy")) == NULL)
        return NULL;
    return PyObject_CallMethodNoArgs(array, name);
}

typedef struct {
    PyObject *value;  /* the operand as the rule's partials see it: an array or a number */
    PyObject *index;  /* a dual's tape index (borrowed), NULL for a constant */
    ArrayFields *array; /* NULL for a number */
    double number;
} Operand;

/* Is tape a list of a running reverse differentiation in this thread (running.depth, a
 * dict of thread-local state, holds its id)? */
static int
is_running(PyObject *tape)
{
    if (!PyList_CheckExact(tape))
        return 0;
    PyObject *depth = astad_thread_state(ew.running, "depth"); /* (borrowed) */
    if (depth == NULL)
        return -1;
    if (!PyDict_CheckExact(depth))
        return 0;
    PyObject *key = PyLong_FromVoidPtr(tape);
    if (key == NULL)
        return -1;
    int found = PyDict_Contains(depth, key);
    Py_DECREF(key);
    return found;
}

/* A view dual (x[1:], x.T) whose index reads its root's current version: ``synced`` is
 * the root's ``i`` (array_dual.index_of has nothing to record). */
static int
view_current(PyObject *view, PyObject *root)
{
    if (Py_TYPE(root) != ew.dual)
        return 0;
    PyObject *synced = SLOT(view, ew.synced), *version = SLOT(root, ew.i);
    if (synced == NULL || version == NULL || !PyLong_CheckExact(synced) ||
            !PyLong_CheckExact(version))
        return 0;
    int same = PyObject_RichCompareBool(synced, version, Py_EQ);
    if (same < 0)
        PyErr_Clear();
    return same == 1;
}

/* Read one operand; 0: not a case of the fast path. */
static int
operand(PyObject *arg, Operand *o, PyObject **tape)
{
    o->index = NULL;
    o->array = NULL;
    if (Py_TYPE(arg) == ew.dual) {
        PyObject *v = SLOT(arg, ew.v), *i = SLOT(arg, ew.i), *t = SLOT(arg, ew.t);
        PyObject *root = SLOT(arg, ew.root);
        if (v == NULL || i == NULL || t == NULL || root == NULL || !PyLong_CheckExact(i))
            return 0;
        if (root != Py_None && !view_current(arg, root))
            return 0; /* (array_dual.index_of records the root's new version first) */
        if (*tape == NULL)
            *tape = t;
        else if (*tape != t)
            return 0;
        o->array = plain_array(v, 0);
        o->value = v;
        o->index = i;
        return o->array != NULL;
    }
    o->value = arg;
    if (Py_TYPE(arg) == ew.ndarray) {
        o->array = plain_array(arg, 0);
        return o->array != NULL;
    }
    return plain_number(arg, &o->number);
}

#define AT(o, j) ((o).array ? ((double *)(o).array->data)[j] : (o).number)

/* numpy's PyArray_New, read from its C-API table (the capsule numpy exports for
 * extensions: the table's order is part of numpy's ABI): an empty array in one call.
 * NULL when configure could not check it; ndarray.copy makes the array then. */
typedef PyObject *(*ArrayNew)(PyTypeObject *, int, const Py_ssize_t *, int, const Py_ssize_t *,
                              void *, int, int, PyObject *);
static ArrayNew array_new = NULL;
#define NPY_DOUBLE 12
#define API_ARRAY_NEW 93

/* a new float64 array shaped like model (an array of the fast path), filled by the caller */
static PyObject *
new_like(PyObject *model, double **data)
{
    ArrayFields *m = (ArrayFields *)model;
    PyObject *result = array_new ? array_new(ew.ndarray, m->nd, m->dimensions, NPY_DOUBLE, NULL,
                                             NULL, 0, 0, NULL) : copy_of(model);
    if (result == NULL)
        return NULL;
    ArrayFields *r = plain_array(result, 1);
    if (r == NULL || !same_shape(r, m)) {
        Py_DECREF(result);
        PyErr_SetString(PyExc_RuntimeError, "astad: numpy made an unexpected array");
        return NULL;
    }
    *data = (double *)r->data;
    return result;
}

/* x ** e defined and silent for every element (the rule computes y x^(y - 1) with
 * numpy's divide and invalid warnings off: left to it where they would fire here) */
static int
power_in_domain(Operand *x, double e, Py_ssize_t n)
{
    int fractional = e != floor(e);
    for (Py_ssize_t j = 0; j < n; j++) {
        double v = ((double *)x->array->data)[j];
        if ((e < 0.0 && v == 0.0) || (fractional && v < 0.0) || isnan(v))
            return 0;
    }
    return isfinite(e);
}

/* The primal and partials of op; 0 (nothing set) to leave them to the Python rule.
 * ``checked``: an array partial holding inf or nan is wrapped in NonFinite (the rule's
 * ``checked``, for the ufuncs not in FINITE_PARTIALS). */
static int
compute(int op, PyObject *func, PyObject *helper, int checked, Operand *x, Operand *y,
        PyObject *model, Py_ssize_t n, PyObject **result, PyObject **partials)
{
    double *r, *p;
    if (op <= SQUARE) { /* exact operations: the primal here */
        *result = new_like(model, &r);
        if (*result == NULL)
            return -1;
        feclearexcept(FE_UNDERFLOW);
        for (Py_ssize_t j = 0; j < n; j++) {
            double a = AT(*x, j);
            switch (op) {
            case ADD: r[j] = a + AT(*y, j); break;
            case SUBTRACT: r[j] = a - AT(*y, j); break;
            case MULTIPLY: r[j] = a * AT(*y, j); break;
            case DIVIDE: r[j] = a / AT(*y, j); break;
            case NEGATIVE: r[j] = -a; break;
            default: r[j] = a * a; break;
            }
        }
        /* not finite, or underflowed: numpy computes it, and warns or raises as the
           user's errstate asks (np.errstate(under="raise")) */
        if (fetestexcept(FE_UNDERFLOW) || !all_finite(r, n))
            goto not_here;
    }
    else { /* numpy's own function for the primal (power: x a dual, y a number) */
        if (op == POWER && (x->index == NULL || y->array != NULL ||
                            !power_in_domain(x, y->number - 1.0, n)))
            goto not_here;
        *result = op == POWER ? PyObject_CallFunctionObjArgs(func, x->value, y->value, NULL)
                              : PyObject_CallOneArg(func, x->value);
        if (*result == NULL)
            return -1;
        ArrayFields *a = plain_array(*result, 0);
        if (a == NULL || !same_shape(a, x->array))
            goto not_here;
        r = (double *)a->data;
    }
    switch (op) { /* the partials, as rules/array.py's lambdas give them */
    case ADD:
    case SUBTRACT:
        partials[0] = PyFloat_FromDouble(1.0);
        partials[1] = PyFloat_FromDouble(op == ADD ? 1.0 : -1.0);
        break;
    case MULTIPLY:
        partials[0] = Py_NewRef(y->value);
        partials[1] = Py_NewRef(x->value);
        break;
    case DIVIDE: /* 1 / y and -r / y, checked for inf and nan below (NonFinite) */
        if (y->array == NULL) { /* a number, not 0 (x / 0 is not finite: left above to
                                 * the rule): Python's 1.0 / y, a float or np.float64 */
            if (x->index != NULL) {
                PyObject *one = PyFloat_FromDouble(1.0);
                if (one == NULL)
                    return -1;
                partials[0] = PyNumber_TrueDivide(one, y->value);
                Py_DECREF(one);
            }
            break;
        }
        if (x->index != NULL) {
            if ((partials[0] = new_like(y->value, &p)) == NULL)
                return -1;
            for (Py_ssize_t j = 0; j < n; j++)
                p[j] = 1.0 / ((double *)y->array->data)[j];
        }
        if (y->index != NULL) {
            if ((partials[1] = new_like(y->value, &p)) == NULL)
                return -1;
            for (Py_ssize_t j = 0; j < n; j++)
                p[j] = -r[j] / ((double *)y->array->data)[j];
        }
        break;
    case NEGATIVE:
        partials[0] = PyFloat_FromDouble(-1.0);
        break;
    case SQUARE:
        if ((partials[0] = new_like(x->value, &p)) == NULL)
            return -1;
        for (Py_ssize_t j = 0; j < n; j++)
            p[j] = 2.0 * AT(*x, j);
        break;
    case SQRT: /* the scalar rule's _inv(2.0 * r): 1 / (2 r), +inf where 2 r == 0 */
    case LOG:
        if ((partials[0] = new_like(x->value, &p)) == NULL)
            return -1;
        for (Py_ssize_t j = 0; j < n; j++) {
            double z = 2.0 * r[j];
            p[j] = op == LOG ? 1.0 / AT(*x, j) : z != 0.0 ? 1.0 / z : INFINITY;
        }
        break;
    case EXP:
        partials[0] = Py_NewRef(*result);
        break;
    case SIN:
    case COS: /* cos x, -sin x: numpy's values */
        if ((partials[0] = PyObject_CallOneArg(helper, x->value)) == NULL)
            return -1;
        ArrayFields *c = plain_array(partials[0], 1);
        if (c == NULL || !same_shape(c, x->array))
            goto not_here;
        if (op == COS)
            for (Py_ssize_t j = 0; j < n; j++)
                ((double *)c->data)[j] = -((double *)c->data)[j];
        break;
    case POWER: /* y x^(y - 1), 0 for y == 0: numpy's power times y */
        if (y->number == 0.0) {
            if ((partials[0] = new_like(x->value, &p)) == NULL)
                return -1;
            memset(p, 0, n * sizeof(double));
            break;
        }
        PyObject *exponent = PyFloat_FromDouble(y->number - 1.0);
        if (exponent == NULL)
            return -1;
        partials[0] = PyObject_CallFunctionObjArgs(helper, x->value, exponent, NULL);
        Py_DECREF(exponent);
        if (partials[0] == NULL)
            return -1;
        ArrayFields *q = plain_array(partials[0], 1);
        if (q == NULL || !same_shape(q, x->array))
            goto not_here;
        for (Py_ssize_t j = 0; j < n; j++)
            ((double *)q->data)[j] = y->number * ((double *)q->data)[j];
        break;
    case TANH: { /* the scalar rule's text (rules/from_scalar.py): 1 - r^2 where
                  * |x| < TANH_NEAR, else sech^2 x = 4 e / ((1 + e) (1 + e)) with
                  * e = exp(-2 |x|), numpy's exp (the helper) of those elements only */
        if ((partials[0] = new_like(x->value, &p)) == NULL)
            return -1;
        Py_ssize_t far = 0;
        for (Py_ssize_t j = 0; j < n; j++) {
            double a = AT(*x, j);
            if (-TANH_NEAR < a && a < TANH_NEAR)
                p[j] = 1.0 - r[j] * r[j];
            else
                far++;
        }
        if (far == 0)
            break;
        if (array_new == NULL)
            goto not_here;
        PyObject *t = array_new(ew.ndarray, 1, &far, NPY_DOUBLE, NULL, NULL, 0, 0, NULL);
        ArrayFields *ta = t ? plain_array(t, 1) : NULL;
        if (ta == NULL) {
            Py_XDECREF(t);
            goto not_here;
        }
        double *tv = (double *)ta->data;
        for (Py_ssize_t j = 0, k = 0; j < n; j++) {
            double a = AT(*x, j);
            if (!(-TANH_NEAR < a && a < TANH_NEAR))
                tv[k++] = -2.0 * fabs(a);
        }
        PyObject *e = PyObject_CallOneArg(helper, t);
        Py_DECREF(t);
        if (e == NULL)
            return -1;
        ArrayFields *ea = plain_array(e, 0);
        if (ea == NULL || ea->nd != 1 || ea->dimensions[0] != far) {
            Py_DECREF(e);
            goto not_here;
        }
        double *ev = (double *)ea->data;
        for (Py_ssize_t j = 0, k = 0; j < n; j++) {
            double a = AT(*x, j);
            if (!(-TANH_NEAR < a && a < TANH_NEAR)) {
                double v = ev[k++];
                p[j] = 4.0 * v / ((1.0 + v) * (1.0 + v));
            }
        }
        Py_DECREF(e);
        break;
    }
    }
    for (int k = 0; k < 2; k++) {
        if (partials[k] == NULL && PyErr_Occurred())
            return -1;
        ArrayFields *a = partials[k] ? plain_array(partials[k], 0) : NULL;
        if (a != NULL && checked && !all_finite((double *)a->data, n)) {
            PyObject *wrapped = PyObject_CallOneArg(ew.non_finite, partials[k]);
            if (wrapped == NULL)
                return -1;
            Py_SETREF(partials[k], wrapped);
        }
    }
    return 1;
not_here:
    if (PyErr_Occurred())
        return -1;
    Py_CLEAR(*result);
    Py_CLEAR(partials[0]);
    Py_CLEAR(partials[1]);
    return 0;
}

/* (index, shape, dtype): a parent as the rule records it */
static PyObject *
parent(Operand *o)
{
    PyObject *shape = shape_of(o->array);
    if (shape == NULL)
        return NULL;
    PyObject *entry = PyTuple_Pack(3, o->index, shape, ew.float64);
    Py_DECREF(shape);
    return entry;
}

/* ArrayDual(result, len(tape), tape) after appending entry to tape */
static PyObject *
record(PyObject *tape, PyObject *result, PyObject *entry)
{
    PyObject *index = PyLong_FromSsize_t(PyList_GET_SIZE(tape));
    if (index == NULL)
        return NULL;
    PyObject *d = ew.dual->tp_alloc(ew.dual, 0);
    if (d == NULL || PyList_Append(tape, entry) < 0) {
        Py_DECREF(index);
        Py_XDECREF(d);
        return NULL;
    }
    SLOT(d, ew.v) = Py_NewRef(result);
    SLOT(d, ew.i) = index;
    SLOT(d, ew.t) = Py_NewRef(tape);
    SLOT(d, ew.root) = Py_NewRef(Py_None);
    SLOT(d, ew.from_root) = Py_NewRef(Py_None);
    SLOT(d, ew.synced) = Py_NewRef(Py_None);
    return d;
}

PyDoc_STRVAR(elementwise_doc,
"elementwise(ufunc, args)\n--\n\n"
"The element-wise rule of ``ufunc`` on ``args`` at once, in C, where it is one of the\n"
"configured cases (see _elementwise.c); NotImplemented otherwise.");

static PyObject *
native_elementwise(PyObject *module, PyObject *const *argv, Py_ssize_t nargs)
{
    if (!astad_check_nargs("elementwise", nargs, 2))
        return NULL;
    PyObject *func = argv[0], *args = argv[1];
    if (!ew.ready || !PyTuple_CheckExact(args))
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *spec = PyDict_GetItemWithError(ew.table, func);
    if (spec == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_NotImplemented);
    PyObject *rule = PyDict_GetItemWithError(ew.rules, func);
    if (rule != PyTuple_GET_ITEM(spec, 1)) /* a rule of the user's own, or none */
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_NotImplemented);
    int op = (int)PyLong_AsLong(PyTuple_GET_ITEM(spec, 0));
    Py_ssize_t arity = IS_BINARY(op) ? 2 : 1;
    if (PyTuple_GET_SIZE(args) != arity)
        Py_RETURN_NOTIMPLEMENTED;
    Operand o[2] = {{0}, {0}};
    PyObject *tape = NULL;
    ArrayFields *shaped = NULL;
    PyObject *model = NULL;
    for (Py_ssize_t k = 0; k < arity; k++) {
        if (!operand(PyTuple_GET_ITEM(args, k), &o[k], &tape))
            Py_RETURN_NOTIMPLEMENTED;
        if (o[k].array != NULL) {
            if (shaped != NULL && !same_shape(shaped, o[k].array))
                Py_RETURN_NOTIMPLEMENTED;
            shaped = o[k].array;
            model = o[k].value;
        }
    }
    if (tape == NULL || shaped == NULL || (arity == 1 && o[0].index == NULL))
        Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t n = size_of(shaped);
    if (n > MAX_SIZE || n == 0)
        Py_RETURN_NOTIMPLEMENTED;
    int running = is_running(tape);
    if (running <= 0)
        return running < 0 ? NULL : Py_NewRef(Py_NotImplemented);

    /* the operands and indices stay alive whatever numpy's calls run (a warning's code) */
    PyObject *held[4] = {Py_NewRef(o[0].value), arity == 2 ? Py_NewRef(o[1].value) : NULL,
                         Py_XNewRef(o[0].index), Py_XNewRef(o[1].index)};
    PyObject *keep = Py_NewRef(tape);
    PyObject *result = NULL, *partials[2] = {NULL, NULL}, *out = NULL;
    PyObject *parents = NULL, *locals = NULL, *entry = NULL;
    int done = compute(op, func, PyTuple_GET_ITEM(spec, 2), PyTuple_GET_ITEM(spec, 3) == Py_True,
                       &o[0], &o[1], model, n, &result, partials);
    if (done <= 0) {
        out = done < 0 ? NULL : Py_NewRef(Py_NotImplemented);
        goto finally;
    }
    Py_ssize_t active = (o[0].index != NULL) + (o[1].index != NULL);
    parents = PyTuple_New(active);
    locals = PyTuple_New(active);
    if (parents == NULL || locals == NULL)
        goto finally;
    for (Py_ssize_t k = 0, q = 0; k < arity; k++) {
        if (o[k].index == NULL)
            continue;
        PyObject *p = parent(&o[k]);
        if (p == NULL)
            goto finally;
        PyTuple_SET_ITEM(parents, q, p);
        PyTuple_SET_ITEM(locals, q, partials[k]);
        partials[k] = NULL;
        q++;
    }
    entry = PyTuple_Pack(3, ew.backward, parents, locals);
    if (entry != NULL)
        out = record(tape, result, entry);
finally:
    Py_XDECREF(entry);
    Py_XDECREF(parents);
    Py_XDECREF(locals);
    Py_XDECREF(partials[0]);
    Py_XDECREF(partials[1]);
    Py_XDECREF(result);
    for (int k = 0; k < 4; k++)
        Py_XDECREF(held[k]);
    Py_DECREF(keep);
    return out;
}

/* --- the backward step ------------------------------------------------------------- */
typedef struct {
    PyObject *index;
    ArrayFields *partial; /* NULL: the number below */
    double number;
    int one;              /* the partial is exactly the float 1.0: the cotangent passes */
} Step;

/* Entry e's backward step done here: 1, or 0 (nothing changed) when it is not a case of
 * the fast path, -1 on error. Semantics of rules/array.py's _elementwise_backward with
 * array_dual.accumulate: the cotangent g is taken from arrays; each parent's is g times
 * the partial, added into an array held there or stored; the last parent's may be g
 * itself, multiplied in place. */
int
astad_elementwise_backward(PyObject *e, PyObject *arrays, Py_ssize_t k)
{
    if (!ew.ready || !PyTuple_CheckExact(e) || PyTuple_GET_SIZE(e) != 3 ||
            PyTuple_GET_ITEM(e, 0) != ew.backward || !PyDict_CheckExact(arrays))
        return 0;
    PyObject *parents = PyTuple_GET_ITEM(e, 1), *partials = PyTuple_GET_ITEM(e, 2);
    if (!PyTuple_CheckExact(parents) || !PyTuple_CheckExact(partials))
        return 0;
    Py_ssize_t count = PyTuple_GET_SIZE(parents);
    if (count < 1 || count > 2 || PyTuple_GET_SIZE(partials) != count)
        return 0;
    PyObject *key = PyLong_FromSsize_t(k);
    if (key == NULL)
        return -1;
    PyObject *g_obj = PyDict_GetItemWithError(arrays, key);
    ArrayFields *g = g_obj ? plain_array(g_obj, 1) : NULL;
    if (g == NULL) {
        Py_DECREF(key);
        return PyErr_Occurred() ? -1 : 0;
    }
    Step steps[2];
    for (Py_ssize_t q = 0; q < count; q++) {
        PyObject *p = PyTuple_GET_ITEM(parents, q), *partial = PyTuple_GET_ITEM(partials, q);
        if (!PyTuple_CheckExact(p) || PyTuple_GET_SIZE(p) != 3 ||
                !PyLong_CheckExact(PyTuple_GET_ITEM(p, 0)) ||
                PyTuple_GET_ITEM(p, 2) != ew.float64)
            goto not_here;
        PyObject *shape = PyTuple_GET_ITEM(p, 1);
        if (!PyTuple_CheckExact(shape) || PyTuple_GET_SIZE(shape) != g->nd)
            goto not_here;
        for (int d = 0; d < g->nd; d++)
            if (PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d)) != g->dimensions[d])
                goto not_here;
        Step *s = &steps[q];
        s->index = PyTuple_GET_ITEM(p, 0);
        s->partial = NULL;
        s->one = PyFloat_CheckExact(partial) && PyFloat_AS_DOUBLE(partial) == 1.0;
        if (!plain_number(partial, &s->number)) {
            s->partial = plain_array(partial, 0);
            if (s->partial == NULL || !same_shape(s->partial, g))
                goto not_here;
        }
        PyObject *existing = PyDict_GetItemWithError(arrays, s->index);
        if (existing != NULL) {
            ArrayFields *x = plain_array(existing, 1);
            if (x == NULL || !same_shape(x, g) || existing == g_obj ||
                    (s->partial != NULL && x->data == s->partial->data))
                goto not_here;
        }
        else if (PyErr_Occurred())
            goto not_here;
    }
    Py_ssize_t n = size_of(g);
    const double *gv = (const double *)g->data;
    Py_INCREF(g_obj); /* popped: ours now */
    if (PyDict_DelItem(arrays, key) < 0) {
        Py_DECREF(g_obj);
        Py_DECREF(key);
        return -1;
    }
    Py_DECREF(key);
    int status = 1;
    for (Py_ssize_t q = 0; q < count && status == 1; q++) {
        Step *s = &steps[q];
        int last = q == count - 1;
        const double *pv = s->partial ? (const double *)s->partial->data : NULL;
        PyObject *existing = PyDict_GetItemWithError(arrays, s->index);
        if (existing != NULL) { /* existing += g * partial */
            double *x = (double *)((ArrayFields *)existing)->data;
            if (s->one)
                for (Py_ssize_t j = 0; j < n; j++)
                    x[j] += gv[j];
            else if (pv)
                for (Py_ssize_t j = 0; j < n; j++)
                    x[j] += gv[j] * pv[j];
            else
                for (Py_ssize_t j = 0; j < n; j++)
                    x[j] += gv[j] * s->number;
            continue;
        }
        if (PyErr_Occurred()) {
            status = -1;
            break;
        }
        PyObject *value;
        double *out;
        if (last) { /* g is not needed after this: its buffer is used */
            value = Py_NewRef(g_obj);
            out = (double *)g->data;
        }
        else if ((value = new_like(g_obj, &out)) == NULL) {
            status = -1;
            break;
        }
        if (s->one) {
            if (!last)
                memcpy(out, gv, n * sizeof(double));
        }
        else {
            if (pv)
                for (Py_ssize_t j = 0; j < n; j++)
                    out[j] = gv[j] * pv[j];
            else
                for (Py_ssize_t j = 0; j < n; j++)
                    out[j] = gv[j] * s->number;
        }
        if (PyDict_SetItem(arrays, s->index, value) < 0)
            status = -1;
        Py_DECREF(value);
    }
    Py_DECREF(g_obj);
    return status;
not_here:
    Py_DECREF(key);
    return PyErr_Occurred() ? -1 : 0;
}

/* --- configuration ----------------------------------------------------------------- */
static int
slot_offset(PyTypeObject *type, const char *name, Py_ssize_t *offset)
{
    PyObject *descr = PyDict_GetItemString(type->tp_dict, name);
    if (descr == NULL || !PyObject_TypeCheck(descr, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "astad: %s has no slot %s", type->tp_name, name);
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "astad: slot %s is not an object slot", name);
        return -1;
    }
    *offset = member->offset;
    return 0;
}

PyDoc_STRVAR(configure_doc,
"configure_elementwise(ArrayDual, ndarray, float64, float64_scalar, running, rules,\n"
"                      table, backward, non_finite, probe, api)\n--\n\n"
"Enable the compiled element-wise rules (rules/array.py calls it once). ``table`` maps\n"
"a ufunc to (op, rule, helper, checked); ``probe`` is np.arange(3.0), read to check numpy's\n"
"array layout; ``api`` numpy's C-API capsule (or None). Returns whether the fast path\n"
"is on.");

static PyObject *
native_configure(PyObject *module, PyObject *const *a, Py_ssize_t nargs)
{
    if (!astad_check_nargs("configure_elementwise", nargs, 11))
        return NULL;
    if (!PyType_Check(a[0]) || !PyType_Check(a[1]) || !PyType_Check(a[3]) ||
            !PyDict_Check(a[5]) || !PyDict_Check(a[6])) {
        PyErr_SetString(PyExc_TypeError, "configure_elementwise: unexpected arguments");
        return NULL;
    }
    ew.ready = 0;
    PyTypeObject *dual = (PyTypeObject *)a[0];
    if (slot_offset(dual, "v", &ew.v) < 0 || slot_offset(dual, "i", &ew.i) < 0 ||
            slot_offset(dual, "t", &ew.t) < 0 || slot_offset(dual, "root", &ew.root) < 0 ||
            slot_offset(dual, "from_root", &ew.from_root) < 0 ||
            slot_offset(dual, "synced", &ew.synced) < 0)
        return NULL;
    Py_XSETREF(ew.dual, (PyTypeObject *)Py_NewRef(a[0]));
    Py_XSETREF(ew.ndarray, (PyTypeObject *)Py_NewRef(a[1]));
    Py_XSETREF(ew.float64, Py_NewRef(a[2]));
    Py_XSETREF(ew.float64_scalar, (PyTypeObject *)Py_NewRef(a[3]));
    Py_XSETREF(ew.running, Py_NewRef(a[4]));
    Py_XSETREF(ew.rules, Py_NewRef(a[5]));
    Py_XSETREF(ew.table, Py_NewRef(a[6]));
    Py_XSETREF(ew.backward, Py_NewRef(a[7]));
    Py_XSETREF(ew.non_finite, Py_NewRef(a[8]));
    /* the probe, np.arange(3.0), read through the layout assumed here */
    ArrayFields *probe = plain_array(a[9], 0);
    int layout = probe != NULL && probe->nd == 1 && probe->dimensions[0] == 3 &&
        probe->strides[0] == (Py_ssize_t)sizeof(double) &&
        ((double *)probe->data)[0] == 0.0 && ((double *)probe->data)[1] == 1.0 &&
        ((double *)probe->data)[2] == 2.0;
    ew.ready = layout;
    /* numpy's C-API table: its ABI version (1.x or 2.x) first, then PyArray_New tried */
    array_new = NULL;
    void **api = PyCapsule_CheckExact(a[10]) ? PyCapsule_GetPointer(a[10], NULL) : NULL;
    if (api == NULL)
        PyErr_Clear();
    else {
        unsigned int abi = ((unsigned int (*)(void))api[0])();
        if (abi == 0x01000009 || abi == 0x02000000) {
            array_new = (ArrayNew)api[API_ARRAY_NEW];
            Py_ssize_t three = 3;
            PyObject *made = array_new(ew.ndarray, 1, &three, NPY_DOUBLE, NULL, NULL, 0, 0, NULL);
            ArrayFields *m = made ? plain_array(made, 1) : NULL;
            if (m == NULL || m->nd != 1 || m->dimensions[0] != 3)
                array_new = NULL;
            Py_XDECREF(made);
            PyErr_Clear();
        }
    }
    return PyBool_FromLong(ew.ready);
}

static PyMethodDef methods[] = {
    {"elementwise", (PyCFunction)(void (*)(void))native_elementwise, METH_FASTCALL,
     elementwise_doc},
    {"configure_elementwise", (PyCFunction)(void (*)(void))native_configure, METH_FASTCALL,
     configure_doc},
    {NULL, NULL, 0, NULL},
};

int
astad_add_elementwise(PyObject *module)
{
    return PyModule_AddFunctions(module, methods);
}
