/* SpecialisedCall: ``f.value_and_grad`` and ``f.grad`` of a decorated function, compiled.
 *
 * api.DiffFunction._specialised is the reference (it serves the pure-Python runtime, and
 * ``.vjp``): when the function's entry has specialised float code (specialise/straight_line.py,
 * specialise/loops.py), no keyword is passed, the argument count is the code's (or fewer,
 * the function's defaults filling the rest: the code takes every parameter), no
 * differentiation runs in this thread, the function's ``__code__`` and every binding the
 * code was written for are unchanged, run it; if it answers (not None, no exception), the
 * answer, reduced to the gradients ``argnums`` chooses, is the result. Otherwise the
 * general path (``general``, a bound method of the DiffFunction) runs and says what the
 * user gets, errors included.
 *
 * Why compiled: for the smallest functions the checks cost more than the code they guard
 * (``x * y``: 0.5 us of checks in Python around 0.2 us of code). Here they are a few
 * pointer comparisons; what the current entry says is read once per entry, not per call.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_native.h"
#include "structmember.h"

#define MAX_ARITY 32 /* (the most parameters a call filling defaults passes on the stack) */


typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *owner;   /* the api.DiffFunction */
    PyObject *general; /* what runs when the specialised code does not apply */
    PyObject *running; /* duals.running (a threading.local): is a differentiation running? */
    PyObject *missing; /* codegen.MISSING: the value a dependency records for no binding */
    PyObject *rebuild; /* rebuild(owner, gradient_only) gives this back: for pickle */
    int gradient_only; /* f.grad (the gradients) rather than f.value_and_grad */
    /* what the entry read last says (refresh) */
    PyObject *entry, *function, *floats, *code, *dependencies, *select;
    Py_ssize_t arity;
    /* a call leaving parameters to their defaults: the fewest arguments the code takes and,
     * for each count of arguments from it, the gradients to return (None: the general path) */
    Py_ssize_t fewest;
    PyObject *selects;
    int tapes;
} SpecialisedCall;

static PyObject *str_entry, *str_fn, *str_floats, *str_arity, *str_code, *str_dependencies,
    *str_tapes, *str_selection;

/* What the entry says, kept: its specialised code, argument count, the code it was made
 * from and the bindings it depends on, whether it uses a tape, which gradients to return.
 * -1 with an error set when the entry cannot be read (the general path then runs). */
static int
refresh(SpecialisedCall *self, PyObject *entry)
{
    Py_CLEAR(self->entry);
    Py_CLEAR(self->function);
    Py_CLEAR(self->floats);
    Py_CLEAR(self->code);
    Py_CLEAR(self->dependencies);
    Py_CLEAR(self->select);
    Py_CLEAR(self->selects);
    self->fewest = self->arity = -1;
    PyObject *floats = PyObject_GetAttr(entry, str_floats);
    if (floats == NULL)
        return -1;
    if (floats == Py_None) { /* no specialised code: the general path always */
        Py_DECREF(floats);
        Py_INCREF(entry);
        self->entry = entry;
        return 0;
    }
    PyObject *arity = PyObject_GetAttr(entry, str_arity);
    PyObject *code = PyObject_GetAttr(entry, str_code);
    PyObject *dependencies = PyObject_GetAttr(entry, str_dependencies);
    PyObject *tapes = PyObject_GetAttr(entry, str_tapes);
    PyObject *function = PyObject_GetAttr(self->owner, str_fn);
    PyObject *select = NULL;
    Py_ssize_t n = arity == NULL ? -1 : PyLong_AsSsize_t(arity);
    int uses_tapes = tapes == NULL ? -1 : PyObject_IsTrue(tapes);
    if (n >= 0 && code != NULL && dependencies != NULL && uses_tapes >= 0 && function != NULL) {
        if (!PyList_CheckExact(dependencies) || !PyFunction_Check(function))
            PyErr_SetString(PyExc_TypeError, "an entry's dependencies are a list");
        else
            select = PyObject_CallMethodObjArgs(self->owner, str_selection, arity, NULL);
    }
    Py_XDECREF(arity);
    Py_XDECREF(tapes);
    if (select == NULL || (!PyUnicode_Check(select) && !PyLong_CheckExact(select) &&
                           !PyTuple_CheckExact(select))) {
        if (select != NULL)
            PyErr_SetString(PyExc_TypeError, "_selection gives 'all', an int or a tuple");
        Py_DECREF(floats);
        Py_XDECREF(code);
        Py_XDECREF(dependencies);
        Py_XDECREF(function);
        Py_XDECREF(select);
        return -1;
    }
    Py_INCREF(entry);
    self->entry = entry;
    /* held weakly: a call kept by a cache of transforms made inline (api/inline.py) must
     * not keep a function made at run time alive */
    self->function = PyWeakref_NewRef(function, NULL);
    PyObject *defaults = PyFunction_GET_DEFAULTS(function);
    Py_ssize_t fewest = defaults == NULL ? n : n - PyTuple_GET_SIZE(defaults);
    Py_DECREF(function);
    if (self->function == NULL) {
        Py_CLEAR(self->entry);
        Py_DECREF(floats);
        Py_DECREF(code);
        Py_DECREF(dependencies);
        Py_DECREF(select);
        return -1;
    }
    self->floats = floats;
    self->code = code;
    self->dependencies = dependencies;
    self->select = select;
    self->arity = n;
    self->tapes = uses_tapes;
    self->fewest = n;
    if (fewest < n && n <= MAX_ARITY && (self->selects = PyTuple_New(n)) != NULL) {
        for (Py_ssize_t k = 0; k < n; k++) {
            PyObject *count = PyLong_FromSsize_t(k), *chosen = NULL;
            if (k >= fewest && count != NULL)
                chosen = PyObject_CallMethodObjArgs(self->owner, str_selection, count, NULL);
            Py_XDECREF(count);
            if (chosen == NULL) { /* (that count's argnums do not fit: the general path) */
                PyErr_Clear();
                chosen = Py_None;
                Py_INCREF(chosen);
            }
            PyTuple_SET_ITEM(self->selects, k, chosen);
        }
        self->fewest = fewest;
    }
    PyErr_Clear();
    return 0;
}

static inline int
plain(PyObject *value) /* _PLAIN: a kind of value never differentiated */
{
    PyTypeObject *type = Py_TYPE(value);
    return type == &PyLong_Type || type == &PyBool_Type || type == &PyUnicode_Type ||
           value == Py_None;
}

/* 1 with *result set: the specialised code's answer; 0: the general path runs; -1 an
 * error to raise (only what the Python reference would also raise). */
static int
specialised(SpecialisedCall *self, PyObject *const *args, Py_ssize_t nargs, PyObject **result)
{
    PyObject *entry = PyObject_GetAttr(self->owner, str_entry);
    if (entry == NULL)
        return -1;
    if (entry != self->entry && refresh(self, entry) < 0) {
        Py_DECREF(entry);
        PyErr_Clear(); /* (the general path reads the entry again and says what is wrong) */
        return 0;
    }
    Py_DECREF(entry);
    if (self->floats == NULL || nargs > self->arity || nargs < self->fewest)
        return 0;
    PyObject *select = self->select;
    if (nargs < self->arity && (select = PyTuple_GET_ITEM(self->selects, nargs)) == Py_None)
        return 0;
    int busy = astad_differentiating(self->running);
    if (busy != 0)
        return busy < 0 ? -1 : 0;
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *function;
    if (PyWeakref_GetRef(self->function, &function) < 0)
        return -1;
    int same_code = function != NULL && PyFunction_GET_CODE(function) == self->code;
    PyObject *defaults = same_code ? PyFunction_GET_DEFAULTS(function) : NULL;
    Py_XINCREF(defaults);
    Py_XDECREF(function);
#else
    PyObject *function = PyWeakref_GetObject(self->function); /* (borrowed; None if gone) */
    int same_code = PyFunction_Check(function) && PyFunction_GET_CODE(function) == self->code;
    PyObject *defaults = same_code ? PyFunction_GET_DEFAULTS(function) : NULL;
    Py_XINCREF(defaults);
#endif
    if (!same_code)
        return 0;
    if (PyList_GET_SIZE(self->dependencies) > 0) {
        int same = astad_unchanged(self->dependencies, self->missing);
        if (same <= 0) {
            Py_XDECREF(defaults);
            return same;
        }
    }
    /* the arguments and, for the parameters they leave out, the function's defaults */
    Py_ssize_t arity = self->arity;
    PyObject *full[MAX_ARITY];
    PyObject *const *passed = args;
    if (nargs < arity) {
        Py_ssize_t missing = arity - nargs, size = defaults ? PyTuple_GET_SIZE(defaults) : 0;
        if (size < missing) { /* (defaults replaced since: the general path reads them) */
            Py_XDECREF(defaults);
            return 0;
        }
        for (Py_ssize_t k = 0; k < nargs; k++)
            full[k] = args[k];
        for (Py_ssize_t j = 0; j < missing; j++)
            full[nargs + j] = PyTuple_GET_ITEM(defaults, size - missing + j);
        passed = full;
    }
    /* hold what the call needs: the code it runs may rebind the function's entry */
    PyObject *floats = self->floats;
    Py_INCREF(floats);
    Py_INCREF(select);
    int paused = self->tapes && PyGC_Disable(); /* (see api._pause_gc) */
    PyObject *out = PyObject_Vectorcall(floats, passed, arity, NULL);
    if (paused)
        PyGC_Enable();
    Py_DECREF(floats);
    Py_XDECREF(defaults);
    int done = 0;
    if (out == NULL) {
        if (PyErr_ExceptionMatches(PyExc_Exception)) {
            PyErr_Clear(); /* (the transformed code raises it at the user's line) */
        } else {
            done = -1;
        }
    }
    else if (out != Py_None && PyTuple_CheckExact(out) && PyTuple_GET_SIZE(out) == 2 &&
             PyTuple_CheckExact(PyTuple_GET_ITEM(out, 1)) &&
             PyTuple_GET_SIZE(PyTuple_GET_ITEM(out, 1)) == arity) {
        PyObject *value = PyTuple_GET_ITEM(out, 0), *gradients = PyTuple_GET_ITEM(out, 1);
        PyObject *chosen = NULL;
        if (PyUnicode_Check(select)) { /* every gradient (of the arguments passed) */
            chosen = nargs == arity ? gradients : PyTuple_GetSlice(gradients, 0, nargs);
            Py_XINCREF(nargs == arity ? chosen : NULL);
            if (chosen == NULL)
                done = -1;
        }
        else if (PyLong_CheckExact(select)) {
            Py_ssize_t k = PyLong_AsSsize_t(select);
            if (0 <= k && k < nargs && !plain(args[k])) { /* (else: the error no float gives) */
                chosen = PyTuple_GET_ITEM(gradients, k);
                Py_INCREF(chosen);
            }
        }
        else {
            Py_ssize_t m = PyTuple_GET_SIZE(select), any = 0;
            for (Py_ssize_t j = 0; j < m; j++) {
                PyObject *index = PyTuple_GET_ITEM(select, j);
                Py_ssize_t k = PyLong_CheckExact(index) ? PyLong_AsSsize_t(index) : -1;
                if (k < 0 || k >= nargs) {
                    any = 0;
                    break;
                }
                any |= !plain(args[k]);
            }
            if (any && (chosen = PyTuple_New(m)) != NULL)
                for (Py_ssize_t j = 0; j < m; j++) {
                    PyObject *g = PyTuple_GET_ITEM(
                        gradients, PyLong_AsSsize_t(PyTuple_GET_ITEM(select, j)));
                    Py_INCREF(g);
                    PyTuple_SET_ITEM(chosen, j, g);
                }
            else if (any)
                done = -1;
        }
        if (chosen != NULL) {
            if (self->gradient_only)
                *result = chosen;
            else if (PyUnicode_Check(select) && nargs == arity) {
                Py_DECREF(chosen);
                *result = out;
                Py_INCREF(out);
            }
            else {
                *result = PyTuple_Pack(2, value, chosen);
                Py_DECREF(chosen);
            }
            done = *result == NULL ? -1 : 1;
        }
    }
    Py_XDECREF(out);
    Py_DECREF(select);
    return done;
}

static PyObject *
specialised_call(SpecialisedCall *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0) {
        PyObject *result = NULL;
        int done = specialised(self, args, PyVectorcall_NARGS(nargsf), &result);
        if (done != 0)
            return done > 0 ? result : NULL;
    }
    return PyObject_Vectorcall(self->general, args, nargsf, kwnames);
}

static PyObject *
specialised_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *owner, *general, *running, *missing, *rebuild;
    int gradient_only;
    static char *keywords[] = {"owner", "general", "running", "missing", "rebuild",
                               "gradient_only", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOp:SpecialisedCall", keywords, &owner,
                                     &general, &running, &missing, &rebuild, &gradient_only))
        return NULL;
    SpecialisedCall *self = PyObject_GC_New(SpecialisedCall, type);
    if (self == NULL)
        return NULL;
    self->vectorcall = (vectorcallfunc)specialised_call;
    Py_INCREF(owner);
    Py_INCREF(general);
    Py_INCREF(running);
    Py_INCREF(missing);
    Py_INCREF(rebuild);
    self->owner = owner;
    self->general = general;
    self->running = running;
    self->missing = missing;
    self->rebuild = rebuild;
    self->gradient_only = gradient_only;
    self->entry = self->function = self->floats = self->code = NULL;
    self->dependencies = self->select = self->selects = NULL;
    self->arity = self->fewest = -1;
    self->tapes = 0;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int
specialised_traverse(SpecialisedCall *self, visitproc visit, void *arg)
{
    Py_VISIT(self->owner);
    Py_VISIT(self->general);
    Py_VISIT(self->running);
    Py_VISIT(self->missing);
    Py_VISIT(self->rebuild);
    Py_VISIT(self->entry);
    Py_VISIT(self->function);
    Py_VISIT(self->floats);
    Py_VISIT(self->code);
    Py_VISIT(self->dependencies);
    Py_VISIT(self->select);
    Py_VISIT(self->selects);
    return 0;
}

static int
specialised_clear(SpecialisedCall *self)
{
    Py_CLEAR(self->owner);
    Py_CLEAR(self->general);
    Py_CLEAR(self->running);
    Py_CLEAR(self->missing);
    Py_CLEAR(self->rebuild);
    Py_CLEAR(self->entry);
    Py_CLEAR(self->function);
    Py_CLEAR(self->floats);
    Py_CLEAR(self->code);
    Py_CLEAR(self->dependencies);
    Py_CLEAR(self->select);
    Py_CLEAR(self->selects);
    return 0;
}

static void
specialised_dealloc(SpecialisedCall *self)
{
    PyObject_GC_UnTrack(self);
    specialised_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *
specialised_repr(SpecialisedCall *self)
{
    return PyObject_Repr(self->general);
}

static PyObject *
specialised_reduce(SpecialisedCall *self, PyObject *Py_UNUSED(ignored))
{
    return Py_BuildValue("O(OO)", self->rebuild, self->owner,
                         self->gradient_only ? Py_True : Py_False);
}

/* Dask's token: the DiffFunction's, and which of its calls this is (deterministic across
 * processes, as pickling.diff_token is) */
static PyObject *
specialised_token(SpecialisedCall *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *token = PyObject_CallMethod(self->owner, "__dask_tokenize__", NULL);
    if (token == NULL)
        return NULL;
    PyObject *result = Py_BuildValue("(sN)", self->gradient_only ? "grad" : "value_and_grad",
                                     token);
    return result;
}

/* What a bound method shows of itself, from the general path (a bound method):
 * ``__self__`` is the DiffFunction, as for ``diff.value_and_grad`` */
static PyObject *
specialised_attribute(SpecialisedCall *self, void *name)
{
    return PyObject_GetAttrString(self->general, (const char *)name);
}

static PyMethodDef specialised_methods[] = {
    {"__reduce__", (PyCFunction)specialised_reduce, METH_NOARGS, NULL},
    {"__dask_tokenize__", (PyCFunction)specialised_token, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

#define ATTRIBUTE(name) {name, (getter)specialised_attribute, NULL, NULL, name}
static PyGetSetDef specialised_getset[] = {
    ATTRIBUTE("__self__"), ATTRIBUTE("__func__"), ATTRIBUTE("__name__"),
    ATTRIBUTE("__qualname__"), ATTRIBUTE("__module__"), ATTRIBUTE("__doc__"),
    {NULL, NULL, NULL, NULL, NULL}};
#undef ATTRIBUTE

static PyTypeObject SpecialisedCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "astad.runtime._native.SpecialisedCall",
    .tp_basicsize = sizeof(SpecialisedCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = specialised_new,
    .tp_dealloc = (destructor)specialised_dealloc,
    .tp_traverse = (traverseproc)specialised_traverse,
    .tp_clear = (inquiry)specialised_clear,
    .tp_vectorcall_offset = offsetof(SpecialisedCall, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = (reprfunc)specialised_repr,
    .tp_methods = specialised_methods,
    .tp_getset = specialised_getset,
};

/* Called by _native.c's module init. */
int
astad_add_specialised_call(PyObject *module)
{
#define INTERN(var, text) \
    if ((var = PyUnicode_InternFromString(text)) == NULL) \
        return -1;
    INTERN(str_entry, "entry")
    INTERN(str_fn, "fn")
    INTERN(str_floats, "tapeless")
    INTERN(str_arity, "arity")
    INTERN(str_code, "code")
    INTERN(str_dependencies, "dependencies")
    INTERN(str_tapes, "tapes")
    INTERN(str_selection, "selection")
#undef INTERN
    if (PyType_Ready(&SpecialisedCallType) < 0)
        return -1;
    Py_INCREF(&SpecialisedCallType);
    if (PyModule_AddObject(module, "SpecialisedCall", (PyObject *)&SpecialisedCallType) < 0) {
        Py_DECREF(&SpecialisedCallType);
        return -1;
    }
    return 0;
}
