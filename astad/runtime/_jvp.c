/* CompiledJvp: ``astad.jvp(f, primals, tangents)`` on floats, compiled.
 *
 * transforms.jvp (``general``) is the reference: it serves the pure-Python runtime and every
 * call not taken here. Two cases run here, each only when no keyword is passed, the primals
 * and the tangents are tuples of floats (exactly; a None tangent is 0.0) of one length,
 * and no differentiation runs in this thread (an outermost jvp):
 *  - ``f`` a Python function of floats whose cached entry (codegen._cache) has forward mode's
 *    code for them (specialise/forward.py; ``jvp_unchecked``: its checks of the arguments are
 *    made here), with ``f.__code__`` and every binding that code was written for unchanged:
 *    the code's answer, when it is a value and a finite float tangent;
 *  - ``f`` an ``astad.grad`` whose Hessian-vector code for floats is known (grad.hvp_known,
 *    api/hvp.py), its function's ``__code__`` and bindings unchanged: ``(gradient, H v)``
 *    taken from the code's answer as hvp.of_floats takes it, when every number is finite.
 * Anything else, an exception included, goes to the reference, which gives the documented
 * result or error (at the user's line).
 *
 * Why compiled: ``x * y``'s forward code takes 0.1 us; the Python checks around it 0.9 us.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_native.h"
#include <math.h>
#include <stddef.h>


#define MAX_ARGUMENTS 32 /* primals (and as many tangents) taken here; more: the reference */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *general;   /* api/transforms.py's jvp, the reference */
    PyObject *cache;     /* compile/entry.py's CACHE: (id(f), True, False) -> entry */
    PyObject *grad_type; /* api/transforms.py's grad */
    PyObject *running;   /* duals.running (a threading.local): is a differentiation running? */
    PyObject *missing;   /* transform/bindings.py's MISSING: a dependency on no binding */
    PyObject *known_type; /* api/hvp.py's HvpKnown: a grad's hvp_known, read by position */
    /* what the entry read last says (refresh): a weak reference to its function, the code
     * it was made from, the bindings it depends on, forward mode's code for floats (NULL:
     * none) */
    PyObject *entry, *function, *code, *dependencies, *forward;
    Py_ssize_t arity;
} CompiledJvp;

static PyObject *str_function, *str_code, *str_dependencies, *str_jvp_unchecked, *str_arity,
    *str_hvp_known;

/* 1 if the weak reference ``ref`` refers to ``obj``, 0 if not, -1 an error */
static int
refers_to(PyObject *ref, PyObject *obj)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *target;
    int alive = PyWeakref_GetRef(ref, &target);
    if (alive <= 0)
        return alive;
    Py_DECREF(target);
    return target == obj;
#else
    return PyWeakref_GetObject(ref) == obj;
#endif
}

/* Read ``f``'s cached entry into the fields: 1 when it is there, 0 when it is not or
 * cannot be read (the reference builds it, or says what is wrong), -1 an error. */
static int
refresh(CompiledJvp *self, PyObject *fun)
{
    PyObject *id = PyLong_FromVoidPtr(fun);
    if (id == NULL)
        return -1;
    PyObject *key = PyTuple_Pack(3, id, Py_True, Py_False);
    Py_DECREF(id);
    if (key == NULL)
        return -1;
    PyObject *entry = PyDict_GetItemWithError(self->cache, key); /* borrowed */
    Py_DECREF(key);
    if (entry == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(entry);
    PyObject *function = PyObject_GetAttr(entry, str_function);
    PyObject *code = PyObject_GetAttr(entry, str_code);
    PyObject *dependencies = PyObject_GetAttr(entry, str_dependencies);
    PyObject *forward = PyObject_GetAttr(entry, str_jvp_unchecked);
    PyObject *arity = PyObject_GetAttr(entry, str_arity);
    Py_ssize_t n = arity == NULL ? -1 : PyLong_AsSsize_t(arity);
    int found = -1;
    if (function != NULL && code != NULL && dependencies != NULL && forward != NULL && n >= 0) {
        if (!PyWeakref_CheckRefExact(function) || !PyList_CheckExact(dependencies))
            PyErr_SetString(PyExc_TypeError, "an entry's function is a weak reference and "
                                             "its dependencies a list");
        else
            found = refers_to(function, fun); /* (0: an entry of a function since gone) */
    }
    Py_XDECREF(arity);
    if (found <= 0) {
        Py_DECREF(entry);
        Py_XDECREF(function);
        Py_XDECREF(code);
        Py_XDECREF(dependencies);
        Py_XDECREF(forward);
        PyErr_Clear(); /* (an entry that cannot be read: the reference reads it and says) */
        return 0;
    }
    Py_XSETREF(self->entry, entry);
    Py_XSETREF(self->function, function);
    Py_XSETREF(self->code, code);
    Py_XSETREF(self->dependencies, dependencies);
    if (forward == Py_None) {
        Py_DECREF(forward);
        forward = NULL;
    }
    Py_XSETREF(self->forward, forward);
    self->arity = n;
    return 1;
}

/* The answer of ``code(*primals, *tangents)``, or NULL: with an error set to raise, or
 * without one when the reference runs (the code raised an Exception: the reference
 * raises it again at the user's line). */
static PyObject *
call_code(PyObject *code, PyObject *const *stack, Py_ssize_t nargs)
{
    Py_INCREF(code); /* (the code it runs may rebind what holds it) */
    PyObject *out = PyObject_Vectorcall(code, stack, nargs, NULL);
    Py_DECREF(code);
    if (out == NULL && PyErr_ExceptionMatches(PyExc_Exception))
        PyErr_Clear();
    return out;
}

/* Is the code ``f`` was written for, with its bindings, still current? 1 yes, 0 no, -1 */
static int
current(PyObject *fun, PyObject *code, PyObject *dependencies, PyObject *missing)
{
    if (!PyFunction_Check(fun) || PyFunction_GET_CODE(fun) != code ||
        !PyList_CheckExact(dependencies))
        return 0;
    return PyList_GET_SIZE(dependencies) == 0 ? 1 : astad_unchanged(dependencies, missing);
}

/* A finite float tangent, or a tuple of them (a tuple of floats returned), exactly those
 * types; anything else the reference decides (transforms._finite) */
static int
finite_tangent(PyObject *tangent, int depth)
{
    if (PyFloat_CheckExact(tangent))
        return isfinite(PyFloat_AS_DOUBLE(tangent));
    if (!PyTuple_CheckExact(tangent) || depth > 8)
        return 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(tangent); k++)
        if (!finite_tangent(PyTuple_GET_ITEM(tangent, k), depth + 1))
            return 0;
    return 1;
}

/* ``f`` a Python function: 1 with *result set, 0 the reference runs, -1 an error */
static int
function_jvp(CompiledJvp *self, PyObject *fun, PyObject *const *stack, Py_ssize_t n,
             PyObject **result)
{
    int known = self->function != NULL ? refers_to(self->function, fun) : 0, read = 0;
    if (known == 0) {
        known = refresh(self, fun);
        read = 1;
    }
    if (known <= 0)
        return known;
    int same = current(fun, self->code, self->dependencies, self->missing);
    if (same == 0 && !read) { /* (the entry kept may be one the reference has replaced) */
        known = refresh(self, fun);
        if (known <= 0)
            return known;
        same = current(fun, self->code, self->dependencies, self->missing);
    }
    if (same <= 0 || self->forward == NULL || n != self->arity)
        return same < 0 ? -1 : 0;
    PyObject *out = call_code(self->forward, stack, 2 * n);
    if (out == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (PyTuple_CheckExact(out) && PyTuple_GET_SIZE(out) == 2 &&
        finite_tangent(PyTuple_GET_ITEM(out, 1), 0)) {
        *result = out; /* (a tangent that is not finite: the duals decide, see specialise/forward.py) */
        return 1;
    }
    Py_DECREF(out);
    return 0;
}

static inline int
finite_float(PyObject *value)
{
    return PyFloat_CheckExact(value) && isfinite(PyFloat_AS_DOUBLE(value));
}

/* ``gradient`` and ``product`` from the Hessian-vector code's flat answer (H v with respect
 * to each argument, then the gradient): hvp.of_floats. NULL without an error: the
 * reference runs. */
static PyObject *
hvp_result(PyObject *flat, Py_ssize_t n, PyObject *positions, int single)
{
    for (Py_ssize_t j = 0; j < 2 * n; j++)
        if (!finite_float(PyTuple_GET_ITEM(flat, j)))
            return NULL; /* (a zero times an infinite partial: the guarded general path) */
    Py_ssize_t m = PyTuple_GET_SIZE(positions);
    for (Py_ssize_t j = 0; j < m; j++) {
        PyObject *index = PyTuple_GET_ITEM(positions, j);
        Py_ssize_t k = PyLong_CheckExact(index) ? PyLong_AsSsize_t(index) : -1;
        if (k < 0 || k >= n || (single && m != 1)) {
            PyErr_Clear();
            return NULL;
        }
    }
    if (single) {
        Py_ssize_t k = PyLong_AsSsize_t(PyTuple_GET_ITEM(positions, 0));
        return PyTuple_Pack(2, PyTuple_GET_ITEM(flat, n + k), PyTuple_GET_ITEM(flat, k));
    }
    PyObject *gradient = PyTuple_New(m), *product = PyTuple_New(m);
    if (gradient == NULL || product == NULL) {
        Py_XDECREF(gradient);
        Py_XDECREF(product);
        return NULL;
    }
    for (Py_ssize_t j = 0; j < m; j++) {
        Py_ssize_t k = PyLong_AsSsize_t(PyTuple_GET_ITEM(positions, j));
        PyObject *g = PyTuple_GET_ITEM(flat, n + k), *p = PyTuple_GET_ITEM(flat, k);
        Py_INCREF(g);
        Py_INCREF(p);
        PyTuple_SET_ITEM(gradient, j, g);
        PyTuple_SET_ITEM(product, j, p);
    }
    PyObject *out = PyTuple_Pack(2, gradient, product);
    Py_DECREF(gradient);
    Py_DECREF(product);
    return out;
}

/* ``f`` an astad.grad: 1 with *result set, 0 the reference runs, -1 an error */
static int
gradient_jvp(CompiledJvp *self, PyObject *fun, PyObject *const *stack, Py_ssize_t n,
             PyObject **result)
{
    PyObject *known = PyObject_GetAttr(fun, str_hvp_known);
    if (known == NULL) {
        PyErr_Clear(); /* (the reference says what is wrong) */
        return 0;
    }
    /* (function, entry, code for floats, arity, __code__, dependencies, positions, single) */
    int done = 0;
    if (Py_TYPE(known) == (PyTypeObject *)self->known_type && PyTuple_GET_SIZE(known) == 8 &&
        PyTuple_GET_ITEM(known, 2) != Py_None && PyLong_CheckExact(PyTuple_GET_ITEM(known, 3)) &&
        PyLong_AsSsize_t(PyTuple_GET_ITEM(known, 3)) == n &&
        PyTuple_CheckExact(PyTuple_GET_ITEM(known, 6)) &&
        PyBool_Check(PyTuple_GET_ITEM(known, 7))) {
        done = current(PyTuple_GET_ITEM(known, 0), PyTuple_GET_ITEM(known, 4),
                       PyTuple_GET_ITEM(known, 5), self->missing);
        if (done > 0) {
            done = 0;
            PyObject *out = call_code(PyTuple_GET_ITEM(known, 2), stack, 2 * n);
            if (out == NULL) {
                done = PyErr_Occurred() ? -1 : 0;
            }
            else {
                PyObject *flat = PyTuple_CheckExact(out) && PyTuple_GET_SIZE(out) == 2
                                     ? PyTuple_GET_ITEM(out, 1) : NULL;
                if (flat != NULL && PyTuple_CheckExact(flat) && PyTuple_GET_SIZE(flat) == 2 * n) {
                    *result = hvp_result(flat, n, PyTuple_GET_ITEM(known, 6),
                                         PyTuple_GET_ITEM(known, 7) == Py_True);
                    done = *result != NULL ? 1 : (PyErr_Occurred() ? -1 : 0);
                }
                Py_DECREF(out);
            }
        }
    }
    else if (PyErr_Occurred()) {
        PyErr_Clear();
    }
    Py_DECREF(known);
    return done;
}

static PyObject *
jvp_call(CompiledJvp *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if ((kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) || nargs != 3 ||
        !PyTuple_CheckExact(args[1]) || !PyTuple_CheckExact(args[2]))
        goto general;
    PyObject *fun = args[0], *primals = args[1], *tangents = args[2];
    Py_ssize_t n = PyTuple_GET_SIZE(primals);
    if (n == 0 || n > MAX_ARGUMENTS || PyTuple_GET_SIZE(tangents) != n)
        goto general;
    static PyObject *zero = NULL; /* a float's None tangent: 0.0 (kept for good) */
    if (zero == NULL && (zero = PyFloat_FromDouble(0.0)) == NULL)
        return NULL;
    PyObject *stack[2 * MAX_ARGUMENTS];
    for (Py_ssize_t i = 0; i < n; i++) {
        stack[i] = PyTuple_GET_ITEM(primals, i);
        stack[n + i] = PyTuple_GET_ITEM(tangents, i);
        if (stack[n + i] == Py_None)
            stack[n + i] = zero;
        if (!PyFloat_CheckExact(stack[i]) || !PyFloat_CheckExact(stack[n + i]))
            goto general;
    }
    int is_function = PyFunction_Check(fun);
    if (!is_function && Py_TYPE(fun) != (PyTypeObject *)self->grad_type)
        goto general;
    int busy = astad_differentiating(self->running);
    if (busy != 0) {
        if (busy < 0)
            return NULL;
        goto general;
    }
    /* (the tuples hold the arguments in ``stack`` for the call) */
    PyObject *result = NULL;
    int done = is_function ? function_jvp(self, fun, stack, n, &result)
                           : gradient_jvp(self, fun, stack, n, &result);
    if (done != 0)
        return done > 0 ? result : NULL;
general:
    return PyObject_Vectorcall(self->general, args, nargsf, kwnames);
}

static PyObject *
jvp_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *general, *cache, *grad_type, *running, *missing, *known_type;
    static char *keywords[] = {"general", "cache", "grad", "running", "missing", "known",
                               NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!O!OOO!:CompiledJvp", keywords, &general,
                                     &PyDict_Type, &cache, &PyType_Type, &grad_type, &running,
                                     &missing, &PyType_Type, &known_type))
        return NULL;
    /* what gradient_jvp reads of an HvpKnown, by position (_native.h): its fields */
    PyObject *fields = PyObject_GetAttrString(known_type, "_fields");
    PyObject *expected = Py_BuildValue("(ssssssss)", "function", "entry", "floats", "arity",
                                       "code", "dependencies", "positions", "single");
    int same = fields != NULL && expected != NULL ?
        PyObject_RichCompareBool(fields, expected, Py_EQ) : -1;
    Py_XDECREF(fields);
    Py_XDECREF(expected);
    if (same != 1) {
        if (same == 0 || !PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "CompiledJvp: known must be api/hvp.py's HvpKnown "
                            "(function, entry, floats, arity, code, dependencies, positions, "
                            "single)");
        return NULL;
    }
    CompiledJvp *self = PyObject_GC_New(CompiledJvp, type);
    if (self == NULL)
        return NULL;
    self->vectorcall = (vectorcallfunc)jvp_call;
    self->general = Py_NewRef(general);
    self->cache = Py_NewRef(cache);
    self->grad_type = Py_NewRef(grad_type);
    self->running = Py_NewRef(running);
    self->missing = Py_NewRef(missing);
    self->known_type = Py_NewRef(known_type);
    self->entry = self->function = self->code = self->dependencies = self->forward = NULL;
    self->arity = -1;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int
jvp_traverse(CompiledJvp *self, visitproc visit, void *arg)
{
    Py_VISIT(self->general);
    Py_VISIT(self->cache);
    Py_VISIT(self->grad_type);
    Py_VISIT(self->running);
    Py_VISIT(self->missing);
    Py_VISIT(self->known_type);
    Py_VISIT(self->entry);
    Py_VISIT(self->function);
    Py_VISIT(self->code);
    Py_VISIT(self->dependencies);
    Py_VISIT(self->forward);
    return 0;
}

static int
jvp_clear(CompiledJvp *self)
{
    Py_CLEAR(self->general);
    Py_CLEAR(self->cache);
    Py_CLEAR(self->grad_type);
    Py_CLEAR(self->running);
    Py_CLEAR(self->missing);
    Py_CLEAR(self->known_type);
    Py_CLEAR(self->entry);
    Py_CLEAR(self->function);
    Py_CLEAR(self->code);
    Py_CLEAR(self->dependencies);
    Py_CLEAR(self->forward);
    return 0;
}

static void
jvp_dealloc(CompiledJvp *self)
{
    PyObject_GC_UnTrack(self);
    jvp_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *
jvp_repr(CompiledJvp *self)
{
    return PyObject_Repr(self->general);
}

/* pickled by name, as the function it stands for (``__module__`` and ``__qualname__``) */
static PyObject *
jvp_reduce(CompiledJvp *self, PyObject *Py_UNUSED(ignored))
{
    return PyObject_GetAttrString(self->general, "__qualname__");
}

/* What a function shows of itself (help, inspect.signature through ``__wrapped__``): the
 * reference's */
static PyObject *
jvp_attribute(CompiledJvp *self, void *name)
{
    if (strcmp((const char *)name, "__wrapped__") == 0)
        return Py_NewRef(self->general);
    return PyObject_GetAttrString(self->general, (const char *)name);
}

static PyMethodDef jvp_methods[] = {
    {"__reduce__", (PyCFunction)jvp_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

#define ATTRIBUTE(name) {name, (getter)jvp_attribute, NULL, NULL, name}
static PyGetSetDef jvp_getset[] = {
    ATTRIBUTE("__name__"), ATTRIBUTE("__qualname__"), ATTRIBUTE("__module__"),
    ATTRIBUTE("__doc__"), ATTRIBUTE("__wrapped__"), ATTRIBUTE("__annotations__"),
    {NULL, NULL, NULL, NULL, NULL}};
#undef ATTRIBUTE

static PyTypeObject CompiledJvpType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "astad.runtime._native.CompiledJvp",
    .tp_basicsize = sizeof(CompiledJvp),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = jvp_new,
    .tp_dealloc = (destructor)jvp_dealloc,
    .tp_traverse = (traverseproc)jvp_traverse,
    .tp_clear = (inquiry)jvp_clear,
    .tp_vectorcall_offset = offsetof(CompiledJvp, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = (reprfunc)jvp_repr,
    .tp_methods = jvp_methods,
    .tp_getset = jvp_getset,
};

/* Called by _native.c's module init. */
int
astad_add_compiled_jvp(PyObject *module)
{
#define INTERN(var, text) \
    if ((var = PyUnicode_InternFromString(text)) == NULL) \
        return -1;
    INTERN(str_function, "function")
    INTERN(str_code, "code")
    INTERN(str_dependencies, "dependencies")
    INTERN(str_jvp_unchecked, "forward_unchecked")
    INTERN(str_arity, "arity")
    INTERN(str_hvp_known, "hvp_known")
#undef INTERN
    if (PyType_Ready(&CompiledJvpType) < 0)
        return -1;
    Py_INCREF(&CompiledJvpType);
    if (PyModule_AddObject(module, "CompiledJvp", (PyObject *)&CompiledJvpType) < 0) {
        Py_DECREF(&CompiledJvpType);
        return -1;
    }
    return 0;
}
