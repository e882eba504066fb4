/* FloatTape: the tape of the code for floats (specialise/loops.py), in C arrays.
 *
 * The code for floats records each entry as ``_extend((slot, partial, slot, partial, ...))``,
 * the same number of pairs per entry (the function's width). On the Python runtime
 * ``_tape`` is a list and ``_extend`` its ``extend``: the pairs become list items, each
 * partial a float kept alive until the sweep, and the sweep (tape.sweep_flat) makes a new
 * Python float for every adjoint it updates. Here the pairs are stored as C integers and
 * doubles (no list growth, no float kept alive) and ``float_adjoints`` sweeps them on C
 * doubles, then makes Python floats only for the adjoints the gradient reads (the slots
 * below ``first``, the arguments'). From Python 3.12 every Python object made or freed
 * costs a thread-local lookup more, which is what the list tape made per entry.
 *
 * The operations and their order are tape.float_adjoints' (entries from the last down,
 * one whose adjoint is zero skipped, pairs in order, ``adjoint[slot] += partial * g``):
 * the adjoints are bit-identical. A partial must be a float (numpy.float64 is one) or an
 * int, a slot an int in range: anything else raises, and the caller's ordinary code runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_native.h"

typedef struct {
    PyObject_HEAD
    Py_ssize_t count, capacity; /* (slot, partial) pairs recorded, and room for */
    Py_ssize_t *slots;
    double *partials;
} FloatTape;

static void
float_tape_dealloc(FloatTape *self)
{
    PyMem_Free(self->slots);
    PyMem_Free(self->partials);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
float_tape_grow(FloatTape *self, Py_ssize_t needed)
{
    Py_ssize_t capacity = self->capacity ? self->capacity : 64;
    while (capacity < needed) {
        if (capacity > PY_SSIZE_T_MAX / 2 / (Py_ssize_t)sizeof(double)) {
            PyErr_NoMemory();
            return -1;
        }
        capacity *= 2;
    }
    Py_ssize_t *slots = PyMem_Realloc(self->slots, capacity * sizeof(Py_ssize_t));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->slots = slots;
    double *partials = PyMem_Realloc(self->partials, capacity * sizeof(double));
    if (partials == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->partials = partials;
    self->capacity = capacity;
    return 0;
}

/* a partial as a double: a float (or a subclass, numpy.float64) or an int, as Python's
 * ``partial * g`` would convert it; -1.0 with an error set otherwise */
static double
partial_value(PyObject *a)
{
    if (PyFloat_Check(a))
        return PyFloat_AS_DOUBLE(a);
    if (PyLong_Check(a))
        return PyLong_AsDouble(a);
    PyErr_Format(PyExc_TypeError, "a tape partial must be a float, not %.100s",
                 Py_TYPE(a)->tp_name);
    return -1.0;
}

/* store ``items`` (slot, partial, slot, partial, ...): all of them, or none and -1 with an
 * error set */
static int
float_tape_store(FloatTape *self, PyObject *const *items, Py_ssize_t size)
{
    if (size % 2) {
        PyErr_SetString(PyExc_TypeError, "a tape entry is (slot, partial) pairs");
        return -1;
    }
    Py_ssize_t n = size / 2;
    if (self->count + n > self->capacity && float_tape_grow(self, self->count + n) < 0)
        return -1;
    Py_ssize_t *slots = self->slots + self->count;
    double *partials = self->partials + self->count;
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *slot = items[2 * q];
        if (!PyLong_CheckExact(slot)) {
            PyErr_SetString(PyExc_TypeError, "a tape slot must be an int");
            return -1;
        }
        slots[q] = PyLong_AsSsize_t(slot);
        if (slots[q] == -1 && PyErr_Occurred())
            return -1;
        partials[q] = partial_value(items[2 * q + 1]);
        if (partials[q] == -1.0 && PyErr_Occurred())
            return -1;
    }
    self->count += n; /* (only once every pair converted: a refused entry adds nothing) */
    return 0;
}

PyDoc_STRVAR(float_tape_extend_doc,
"extend(pairs)\n--\n\n"
"Record a tuple of (slot, partial) pairs, as list.extend would append its items.");

static PyObject *
float_tape_extend(FloatTape *self, PyObject *pairs)
{
    if (!PyTuple_CheckExact(pairs)) {
        PyErr_SetString(PyExc_TypeError, "a tape entry must be a tuple of (slot, partial) "
                                         "pairs");
        return NULL;
    }
    if (float_tape_store(self, &PyTuple_GET_ITEM(pairs, 0), PyTuple_GET_SIZE(pairs)) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(float_tape_record_doc,
"record(slot, partial, ...)\n--\n\n"
"Record the (slot, partial) pairs given as arguments: extend without the tuple.");

static PyObject *
float_tape_record(FloatTape *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (float_tape_store(self, args, nargs) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static Py_ssize_t
float_tape_length(FloatTape *self)
{
    return 2 * self->count; /* (the items a list tape would hold) */
}

static PyMethodDef float_tape_methods[] = {
    {"extend", (PyCFunction)float_tape_extend, METH_O, float_tape_extend_doc},
    {"record", (PyCFunction)(void (*)(void))float_tape_record, METH_FASTCALL,
     float_tape_record_doc},
    {NULL, NULL, 0, NULL}};

static PySequenceMethods float_tape_as_sequence = {.sq_length = (lenfunc)float_tape_length};

static PyTypeObject FloatTapeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "astad.runtime._native.FloatTape",
    .tp_basicsize = sizeof(FloatTape),
    .tp_dealloc = (destructor)float_tape_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "FloatTape(): the (slot, partial) pairs of the code for floats, in C arrays",
    .tp_methods = float_tape_methods,
    .tp_as_sequence = &float_tape_as_sequence,
    .tp_new = PyType_GenericNew,
};

PyDoc_STRVAR(float_adjoints_doc,
"float_adjoints(tape, width, seed, first, last)\n--\n\n"
"tape.float_adjoints, compiled: sweep a FloatTape of `width` pairs an entry, entry `first`\n"
"first, seeded with 1.0 at slot `seed`; the adjoints of the slots below `first`.");

static PyObject *
float_adjoints(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!astad_check_nargs("float_adjoints", nargs, 5))
        return NULL;
    if (!PyObject_TypeCheck(args[0], &FloatTapeType)) {
        PyErr_SetString(PyExc_TypeError, "float_adjoints takes a FloatTape");
        return NULL;
    }
    FloatTape *tape = (FloatTape *)args[0];
    Py_ssize_t width = PyLong_AsSsize_t(args[1]);
    Py_ssize_t seed = PyLong_AsSsize_t(args[2]);
    Py_ssize_t first = PyLong_AsSsize_t(args[3]);
    if (PyErr_Occurred())
        return NULL;
    if (width < 1 || tape->count % width || first < 0 ||
        first > PY_SSIZE_T_MAX - tape->count / width) {
        PyErr_SetString(PyExc_ValueError, "a tape of another width");
        return NULL;
    }
    Py_ssize_t entries = tape->count / width, size = first + entries;
    if (seed < 0 || seed >= size) {
        PyErr_SetString(PyExc_IndexError, "the seed's slot is not on the tape");
        return NULL;
    }
    double *adjoint = PyMem_Calloc(size ? size : 1, sizeof(double));
    if (adjoint == NULL)
        return PyErr_NoMemory();
    adjoint[seed] = 1.0;
    for (Py_ssize_t m = entries - 1; m >= 0; m--) {
        double g = adjoint[first + m];
        if (g == 0.0)
            continue; /* (as ``if g:``: a zero adjoint passes nothing on, nan does) */
        const Py_ssize_t *slots = tape->slots + m * width;
        const double *partials = tape->partials + m * width;
        for (Py_ssize_t q = 0; q < width; q++) {
            if (slots[q] < 0 || slots[q] >= size) {
                PyMem_Free(adjoint);
                PyErr_SetString(PyExc_IndexError, "a tape slot out of range");
                return NULL;
            }
            adjoint[slots[q]] += partials[q] * g;
        }
    }
    PyObject *out = PyList_New(first);
    for (Py_ssize_t k = 0; out != NULL && k < first; k++) {
        PyObject *value = PyFloat_FromDouble(adjoint[k]);
        if (value == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, k, value);
    }
    PyMem_Free(adjoint);
    return out;
}

static PyMethodDef float_tape_functions[] = {
    {"float_adjoints", (PyCFunction)(void (*)(void))float_adjoints, METH_FASTCALL,
     float_adjoints_doc},
    {NULL, NULL, 0, NULL}};

int
astad_add_float_tape(PyObject *module)
{
    if (PyType_Ready(&FloatTapeType) < 0 ||
        PyModule_AddObjectRef(module, "FloatTape", (PyObject *)&FloatTapeType) < 0)
        return -1;
    return PyModule_AddFunctions(module, float_tape_functions);
}
