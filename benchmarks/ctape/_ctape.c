/* A prototype, not part of astad: a tape that keeps the specialised code's (parent slot,
 * partial) pairs in C arrays, so recording an entry makes no tuple and keeps no Python
 * object alive, and its sweep runs on C doubles. benchmarks/ctape.py builds it and times
 * a hand-written dot-product gradient recorded on it against today's list tape.
 *
 *   tape = Tape(width, first)       entries of `width` pairs; the first entry's index
 *   k = tape.record(i, a, j, b, ...) one entry of exactly `width` pairs; returns its index
 *   adjoint = tape.gradient(index, n) the sweep seeded with 1.0 at `index`, exactly as
 *                                    tape.sweep_flat runs it (descending entries, a zero
 *                                    adjoint skipped, pairs in order); the first `n`
 *                                    adjoints as a list of floats. Frees the tape.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    PyObject_HEAD
    Py_ssize_t width, first, count, capacity;
    Py_ssize_t *slots;
    double *partials;
} TapeObject;

static void
tape_release(TapeObject *self)
{
    PyMem_Free(self->slots);
    PyMem_Free(self->partials);
    self->slots = NULL;
    self->partials = NULL;
    self->count = self->capacity = 0;
}

static void
tape_dealloc(TapeObject *self)
{
    tape_release(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
tape_init(TapeObject *self, PyObject *args, PyObject *kwds)
{
    if (!PyArg_ParseTuple(args, "nn", &self->width, &self->first))
        return -1;
    if (self->width < 1) {
        PyErr_SetString(PyExc_ValueError, "width must be at least 1");
        return -1;
    }
    tape_release(self);
    return 0;
}

static int
grow(TapeObject *self)
{
    Py_ssize_t capacity = self->capacity ? 2 * self->capacity : 256;
    Py_ssize_t *slots = PyMem_Realloc(self->slots, capacity * self->width * sizeof(Py_ssize_t));
    if (slots == NULL)
        return -1;
    self->slots = slots;
    double *partials = PyMem_Realloc(self->partials, capacity * self->width * sizeof(double));
    if (partials == NULL)
        return -1;
    self->partials = partials;
    self->capacity = capacity;
    return 0;
}

static PyObject *
tape_record(TapeObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t width = self->width;
    if (nargs != 2 * width) {
        PyErr_Format(PyExc_TypeError, "record takes %zd arguments (%zd pairs), got %zd",
                     2 * width, width, nargs);
        return NULL;
    }
    if (self->count == self->capacity && grow(self) < 0)
        return PyErr_NoMemory();
    Py_ssize_t *slots = self->slots + self->count * width;
    double *partials = self->partials + self->count * width;
    for (Py_ssize_t q = 0; q < width; q++) {
        Py_ssize_t slot = PyLong_AsSsize_t(args[2 * q]);
        if (slot == -1 && PyErr_Occurred())
            return NULL;
        PyObject *a = args[2 * q + 1];
        double partial = PyFloat_CheckExact(a) ? PyFloat_AS_DOUBLE(a) : PyFloat_AsDouble(a);
        if (partial == -1.0 && PyErr_Occurred())
            return NULL;
        slots[q] = slot;
        partials[q] = partial;
    }
    return PyLong_FromSsize_t(self->first + self->count++);
}

static PyObject *
tape_gradient(TapeObject *self, PyObject *args)
{
    Py_ssize_t index, n;
    if (!PyArg_ParseTuple(args, "nn", &index, &n))
        return NULL;
    Py_ssize_t size = self->first + self->count;
    if (index < 0 || index >= size || n < 0 || n > size) {
        PyErr_SetString(PyExc_IndexError, "seed index or n out of range");
        return NULL;
    }
    double *adjoint = PyMem_Calloc(size, sizeof(double));
    if (adjoint == NULL)
        return PyErr_NoMemory();
    adjoint[index] = 1.0;
    Py_ssize_t width = self->width;
    for (Py_ssize_t m = self->count - 1; m >= 0; m--) {
        double g = adjoint[self->first + m];
        if (g == 0.0)
            continue;
        const Py_ssize_t *slots = self->slots + m * width;
        const double *partials = self->partials + m * width;
        for (Py_ssize_t q = 0; q < width; q++) {
            Py_ssize_t slot = slots[q];
            if (slot < 0 || slot >= size) {
                PyMem_Free(adjoint);
                PyErr_SetString(PyExc_IndexError, "list index out of range");
                return NULL;
            }
            adjoint[slot] += partials[q] * g;
        }
    }
    tape_release(self);
    PyObject *out = PyList_New(n);
    for (Py_ssize_t k = 0; out != NULL && k < n; k++) {
        PyObject *value = PyFloat_FromDouble(adjoint[k]);
        if (value == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, k, value);
    }
    PyMem_Free(adjoint);
    return out;
}

static Py_ssize_t
tape_length(TapeObject *self)
{
    return self->count;
}

static PyMethodDef tape_methods[] = {
    {"record", (PyCFunction)(void (*)(void))tape_record, METH_FASTCALL,
     "record(i, a, j, b, ...): one entry of `width` pairs; returns its index"},
    {"gradient", (PyCFunction)tape_gradient, METH_VARARGS,
     "gradient(index, n): sweep seeded at index; the first n adjoints; frees the tape"},
    {NULL, NULL, 0, NULL}};

static PySequenceMethods tape_as_sequence = {.sq_length = (lenfunc)tape_length};

static PyTypeObject TapeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_ctape.Tape",
    .tp_basicsize = sizeof(TapeObject),
    .tp_dealloc = (destructor)tape_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Tape(width, first): (slot, partial) pairs in C arrays (a prototype)",
    .tp_methods = tape_methods,
    .tp_as_sequence = &tape_as_sequence,
    .tp_init = (initproc)tape_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef ctape_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_ctape",
    .m_doc = "A prototype C tape for astad's specialised code (benchmarks only).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__ctape(void)
{
    if (PyType_Ready(&TapeType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&ctape_module);
    if (module != NULL && PyModule_AddObjectRef(module, "Tape", (PyObject *)&TapeType) < 0)
        Py_CLEAR(module);
    return module;
}
