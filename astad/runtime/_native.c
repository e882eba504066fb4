/* The compiled backward sweep: sweep, sweep_and_free and sweep_flat of tape.py, in C.
 *
 * tape.py holds the reference implementations and their documentation; these run the
 * same operations in the same order, so the adjoints they leave are bit-identical:
 *
 * - an entry runs only when its adjoint is non-zero (Python's truth test), so a zero
 *   adjoint contributes nothing even against an infinite or NaN partial;
 * - ``adjoint[i] += a * g`` is one rounded product, then one rounded sum, pair by pair in
 *   the entry's order (the build turns off floating-point contraction, so no fused
 *   multiply-add changes a last bit). Only a NaN's sign may differ: CPython's own differs
 *   between its specialised and generic float operations, which take the NaN of
 *   different operands;
 * - an array or custom entry (a triple) is called back as
 *   ``backward(adjoint, arrays, k, parents, context)``, also when its adjoint is zero but
 *   ``k in arrays``;
 * - sweep_and_free and sweep_flat delete the tape chunk by chunk as tape.py does.
 *
 * Exact floats (adjoints and partials) and exact int slots take the fast path: the
 * update is done on C doubles, and an adjoint float that only the adjoint list refers to
 * is updated in place (nothing else can see it) rather than replaced by a new float. Any
 * other object (a dual of an enclosing differentiation, a numpy value, an int partial)
 * goes through the number protocol exactly as the Python statement would: read
 * ``adjoint[i]``, multiply ``a * g``, ``+=``, store. A tape or adjoint that is not exactly
 * a list is handed to the Python implementation (tape.python_sweeps).
 *
 * Also float_lists and float_rows (specialise/value_kinds.py): the checks the specialised code
 * makes of its list arguments on every call, a few times faster than set(map(type, xs)).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_native.h"
#include <math.h>


#define SWEEP_CHUNK 256 /* tape._SWEEP_CHUNK: entries swept, then freed, at a time */

/* tape.python_sweeps[which] (the Python sweep, sweep_and_free or sweep_flat) called with
 * these arguments: for a tape or adjoint that is not exactly a list */
static PyObject *
call_python(int which, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *tape = PyImport_ImportModule("astad.runtime.tape");
    if (tape == NULL)
        return NULL;
    PyObject *sweeps = PyObject_GetAttrString(tape, "python_sweeps");
    Py_DECREF(tape);
    if (sweeps == NULL)
        return NULL;
    PyObject *function = PySequence_GetItem(sweeps, which);
    Py_DECREF(sweeps);
    if (function == NULL)
        return NULL;
    PyObject *result = PyObject_Vectorcall(function, args, nargs, NULL);
    Py_DECREF(function);
    return result;
}

/* adjoint[i] += a * gv when every operand is an exact float and i an exact int within
 * the list: 1 done, 0 not this case (nothing changed, no error set). Runs no Python code. */
static inline int
update_float(PyObject *adjoint, PyObject *i, PyObject *a, double gv)
{
    if (!PyFloat_CheckExact(a) || !PyLong_CheckExact(i))
        return 0;
    Py_ssize_t n = PyList_GET_SIZE(adjoint);
    Py_ssize_t slot = PyLong_AsSsize_t(i);
    if (slot == -1 && PyErr_Occurred()) {
        PyErr_Clear(); /* too large: the generic path raises Python's IndexError */
        return 0;
    }
    if (slot < 0)
        slot += n;
    if (slot < 0 || slot >= n)
        return 0;
    PyObject *old = PyList_GET_ITEM(adjoint, slot);
    if (!PyFloat_CheckExact(old))
        return 0;
    double product = PyFloat_AS_DOUBLE(a) * gv;
    double sum = PyFloat_AS_DOUBLE(old) + product;
#ifndef Py_GIL_DISABLED
    if (Py_REFCNT(old) == 1) { /* only the list holds it */
        ((PyFloatObject *)old)->ob_fval = sum;
        return 1;
    }
#endif
    PyObject *new_value = PyFloat_FromDouble(sum);
    if (new_value == NULL)
        return -1; /* error set */
    PyList_SET_ITEM(adjoint, slot, new_value);
    Py_DECREF(old);
    return 1;
}

/* adjoint[i] += a * g as the Python statement runs it. The caller owns i, a and g. */
static int
update_generic(PyObject *adjoint, PyObject *i, PyObject *a, PyObject *g)
{
    PyObject *old = PyObject_GetItem(adjoint, i);
    if (old == NULL)
        return -1;
    PyObject *product = PyNumber_Multiply(a, g);
    if (product == NULL) {
        Py_DECREF(old);
        return -1;
    }
    PyObject *sum = PyNumber_InPlaceAdd(old, product);
    Py_DECREF(old);
    Py_DECREF(product);
    if (sum == NULL)
        return -1;
    int status = PyObject_SetItem(adjoint, i, sum);
    Py_DECREF(sum);
    return status;
}

/* The pairs (items[0], items[1]), (items[2], items[3]), ... of one entry, in order, with
 * adjoint g (gv its value when g is an exact float). Each pair takes the fast path when
 * it can. Once a pair needs the generic path (which may run Python code), the remaining
 * items and g are held for the rest of the entry, a float g as a fresh float of the
 * value the entry started with (an in-place update of slot k must not change it). */
static int
update_pairs(PyObject *adjoint, PyObject *const *items, Py_ssize_t npairs, PyObject *g,
             double gv, int g_is_float)
{
    Py_ssize_t q = 0;
    if (g_is_float) {
        for (; q < npairs; q++) {
            int done = update_float(adjoint, items[2 * q], items[2 * q + 1], gv);
            if (done < 0)
                return -1;
            if (!done)
                break;
        }
        if (q == npairs)
            return 0;
    }
    PyObject *held_g = g_is_float ? PyFloat_FromDouble(gv) : Py_NewRef(g);
    if (held_g == NULL)
        return -1;
    /* the rest of the items, held in a buffer of our own: Python code run from here on
     * could change the list they were read from */
    Py_ssize_t left = 2 * (npairs - q);
    PyObject *buffer[16];
    PyObject **held = left <= 16 ? buffer : PyMem_New(PyObject *, left);
    if (held == NULL) {
        Py_DECREF(held_g);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t m = 0; m < left; m++)
        held[m] = Py_NewRef(items[2 * q + m]);
    int status = 0;
    for (Py_ssize_t m = 0; m < left && status == 0; m += 2) {
        int done = g_is_float ? update_float(adjoint, held[m], held[m + 1], gv) : 0;
        status = done < 0 ? -1 : done ? 0 : update_generic(adjoint, held[m], held[m + 1],
                                                           held_g);
    }
    for (Py_ssize_t m = 0; m < left; m++)
        Py_DECREF(held[m]);
    if (held != buffer)
        PyMem_Free(held);
    Py_DECREF(held_g);
    return status;
}

/* Python's `if g:` for an adjoint: 1, 0, or -1 on error. */
static inline int
is_nonzero(PyObject *g)
{
    return PyFloat_CheckExact(g) ? PyFloat_AS_DOUBLE(g) != 0.0 : PyObject_IsTrue(g);
}

/* adjoint[k] of a list, with Python's negative indices and IndexError; borrowed. */
static inline PyObject *
adjoint_at(PyObject *adjoint, Py_ssize_t k)
{
    Py_ssize_t n = PyList_GET_SIZE(adjoint);
    Py_ssize_t slot = k < 0 ? k + n : k;
    if (slot < 0 || slot >= n) {
        PyErr_SetString(PyExc_IndexError, "list index out of range");
        return NULL;
    }
    return PyList_GET_ITEM(adjoint, slot);
}

/* e[0](adjoint, arrays, k, e[1], e[2]): an array or custom entry's backward. */
static int
call_backward(PyObject *e, PyObject *adjoint, PyObject *arrays, Py_ssize_t k)
{
    int fast = astad_elementwise_backward(e, arrays, k); /* _elementwise.c */
    if (fast != 0)
        return fast < 0 ? -1 : 0;
    PyObject *args[6] = {NULL, adjoint, arrays, NULL, NULL, NULL};
    PyObject *backward = PySequence_GetItem(e, 0);
    int status = -1;
    if (backward == NULL)
        return -1;
    args[3] = PyLong_FromSsize_t(k);
    if (args[3] == NULL)
        goto done;
    args[4] = PySequence_GetItem(e, 1);
    if (args[4] == NULL)
        goto done;
    args[5] = PySequence_GetItem(e, 2);
    if (args[5] == NULL)
        goto done;
    PyObject *result = PyObject_Vectorcall(backward, args + 1,
                                           5 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (result != NULL) {
        Py_DECREF(result);
        status = 0;
    }
done:
    Py_DECREF(backward);
    Py_XDECREF(args[3]);
    Py_XDECREF(args[4]);
    Py_XDECREF(args[5]);
    return status;
}

/* One entry of the tuple tape whose adjoint g is non-zero. The caller owns e and g. */
static int
run_entry(PyObject *e, PyObject *adjoint, PyObject *arrays, Py_ssize_t k, PyObject *g,
          double gv, int g_is_float)
{
    if (PyTuple_CheckExact(e) && PyTuple_GET_SIZE(e) != 3 && PyTuple_GET_SIZE(e) % 2 == 0)
        return update_pairs(adjoint, &PyTuple_GET_ITEM(e, 0), PyTuple_GET_SIZE(e) / 2, g, gv,
                            g_is_float);
    Py_ssize_t n = PyObject_Size(e);
    if (n < 0)
        return -1;
    if (n == 3)
        return call_backward(e, adjoint, arrays, k);
    PyObject *items = PySequence_Fast(e, "a tape entry must be a sequence");
    if (items == NULL)
        return -1;
    int status = 0;
    if (PySequence_Fast_GET_SIZE(items) != n) {
        PyErr_SetString(PyExc_RuntimeError, "a tape entry changed size during the sweep");
        status = -1;
    }
    else {
        status = update_pairs(adjoint, PySequence_Fast_ITEMS(items), n / 2, g, gv,
                              g_is_float);
    }
    if (status == 0 && n % 2) {
        /* adjoint[e[n - 1]] += e[n] * g: Python reads the adjoint, then fails on e[n] */
        PyObject *old = PyObject_GetItem(adjoint, PySequence_Fast_GET_ITEM(items, n - 1));
        if (old != NULL) {
            Py_DECREF(old);
            PyErr_SetString(PyExc_IndexError, PyTuple_CheckExact(e) ?
                            "tuple index out of range" : "list index out of range");
        }
        status = -1;
    }
    Py_DECREF(items);
    return status;
}

/* `k in arrays`, with no int object made for an empty dict (the common case) */
static inline int
in_arrays(PyObject *arrays, Py_ssize_t k)
{
    if (PyDict_CheckExact(arrays) && PyDict_GET_SIZE(arrays) == 0)
        return 0;
    PyObject *key = PyLong_FromSsize_t(k);
    if (key == NULL)
        return -1;
    int found = PySequence_Contains(arrays, key);
    Py_DECREF(key);
    return found;
}

/* tape.sweep on list tape and adjoint: entries len(tape) - 1 down to first */
static int
sweep_lists(PyObject *tape, PyObject *adjoint, Py_ssize_t first, PyObject *arrays)
{
    for (Py_ssize_t k = PyList_GET_SIZE(tape) - 1; k >= first && k >= 0; k--) {
        if (k >= PyList_GET_SIZE(tape))
            break; /* reversed(tape) stops where the list ends */
        PyObject *e = PyList_GET_ITEM(tape, k);
        PyObject *g = adjoint_at(adjoint, k);
        if (g == NULL)
            return -1;
        if (PyFloat_CheckExact(g) && PyTuple_CheckExact(e)) { /* the common case */
            double gv = PyFloat_AS_DOUBLE(g);
            Py_ssize_t n = PyTuple_GET_SIZE(e);
            if (gv != 0.0 && n != 3 && n % 2 == 0) {
                /* the pairs hold e alive: only the generic path runs Python code, and
                 * update_pairs holds the items it needs from there on */
                Py_INCREF(e);
                int status = update_pairs(adjoint, &PyTuple_GET_ITEM(e, 0), n / 2, g, gv, 1);
                Py_DECREF(e);
                if (status < 0)
                    return -1;
                continue;
            }
        }
        Py_INCREF(e);
        Py_INCREF(g);
        int status;
        int nonzero = is_nonzero(g);
        if (nonzero < 0)
            status = -1;
        else if (nonzero)
            status = run_entry(e, adjoint, arrays, k, g,
                               PyFloat_CheckExact(g) ? PyFloat_AS_DOUBLE(g) : 0.0,
                               PyFloat_CheckExact(g));
        else {
            int found = in_arrays(arrays, k);
            status = found < 0 ? -1 : found ? call_backward(e, adjoint, arrays, k) : 0;
        }
        Py_DECREF(g);
        Py_DECREF(e);
        if (status < 0)
            return -1;
    }
    return 0;
}

/* ``running.<name>`` for this thread (duals.running, thread-local state made once per
 * thread and changed in place: runtime/duals.py), borrowed; NULL with an error set. It is
 * read once per thread and kept, by the thread state's id (unique in the process, never
 * reused). Also _elementwise.c's (``depth``). */
#define THREAD_STATES 2 /* the names asked for: "stack" and "depth" */
PyObject *
astad_thread_state(PyObject *running, const char *name)
{
    static struct {
        const char *name;
        PyObject *value, *owner; /* (owner: compared, never dereferenced) */
        uint64_t thread;
    } kept[THREAD_STATES];
    int k = 0;
    while (k < THREAD_STATES && kept[k].name != NULL && strcmp(kept[k].name, name) != 0)
        k++;
    if (k == THREAD_STATES) {
        PyErr_Format(PyExc_SystemError, "astad_thread_state: no room for %s", name);
        return NULL;
    }
    uint64_t thread = PyThreadState_GetID(PyThreadState_Get());
    if (kept[k].value == NULL || kept[k].thread != thread || kept[k].owner != running) {
        PyObject *value = PyObject_GetAttrString(running, name);
        if (value == NULL)
            return NULL;
        Py_XSETREF(kept[k].value, value);
        kept[k].name = name;
        kept[k].owner = running;
        kept[k].thread = thread;
    }
    return kept[k].value;
}

/* Is a differentiation running in this thread: is ``running.stack`` not empty? 1, 0, or
 * -1 with an error (_specialised.c's and _jvp.c's). */
int
astad_differentiating(PyObject *running)
{
    PyObject *stack = astad_thread_state(running, "stack");
    if (stack == NULL)
        return -1;
    return PyList_CheckExact(stack) ? PyList_GET_SIZE(stack) > 0 : PyObject_IsTrue(stack);
}

/* 1, or 0 with TypeError set: the argument count of a METH_FASTCALL function (also
 * _elementwise.c's) */
int
astad_check_nargs(const char *name, Py_ssize_t nargs, Py_ssize_t expected)
{
    if (nargs == expected)
        return 1;
    PyErr_Format(PyExc_TypeError, "%s expected %zd arguments, got %zd", name, expected, nargs);
    return 0;
}

static int
parse_index(PyObject *obj, Py_ssize_t *out)
{
    /* an int, or what has __index__, as range() takes it (clamped: range would
     * sweep nothing or everything past the ends of a list) */
    *out = PyNumber_AsSsize_t(obj, NULL);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

PyDoc_STRVAR(sweep_doc,
"sweep(tape, adjoint, first, arrays)\n--\n\n"
"tape.sweep, compiled: propagate adjoint from the last tape entry down to first.");

static PyObject *
native_sweep(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t first;
    if (!astad_check_nargs("sweep", nargs, 4))
        return NULL;
    if (!PyList_CheckExact(args[0]) || !PyList_CheckExact(args[1]))
        return call_python(0, args, nargs);
    if (parse_index(args[2], &first) < 0)
        return NULL;
    if (sweep_lists(args[0], args[1], first, args[3]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(sweep_and_free_doc,
"sweep_and_free(tape, adjoint, first, arrays)\n--\n\n"
"tape.sweep_and_free, compiled: sweep, deleting each chunk of entries once swept.");

static PyObject *
native_sweep_and_free(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t first;
    if (!astad_check_nargs("sweep_and_free", nargs, 4))
        return NULL;
    PyObject *tape = args[0], *adjoint = args[1], *arrays = args[3];
    if (!PyList_CheckExact(tape) || !PyList_CheckExact(adjoint))
        return call_python(1, args, nargs);
    if (parse_index(args[2], &first) < 0)
        return NULL;
    Py_ssize_t top = PyList_GET_SIZE(tape);
    while (top > first) {
        top = top - SWEEP_CHUNK > first ? top - SWEEP_CHUNK : first;
        if (sweep_lists(tape, adjoint, top, arrays) < 0)
            return NULL;
        if (PySequence_DelSlice(tape, top, PY_SSIZE_T_MAX) < 0) /* del tape[top:] */
            return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(sweep_flat_doc,
"sweep_flat(tape, width, adjoint, first)\n--\n\n"
"tape.sweep_flat, compiled: the freeing sweep of the specialised code's flat tape.");

static PyObject *
native_sweep_flat(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t width, first;
    if (!astad_check_nargs("sweep_flat", nargs, 4))
        return NULL;
    PyObject *tape = args[0], *adjoint = args[2];
    if (!PyList_CheckExact(tape) || !PyList_CheckExact(adjoint))
        return call_python(2, args, nargs);
    if (parse_index(args[1], &width) < 0 || parse_index(args[3], &first) < 0)
        return NULL;
    if (width == 0) {
        PyErr_SetString(PyExc_ZeroDivisionError, "integer division or modulo by zero");
        return NULL;
    }
    if (width < 0 || width > PY_SSIZE_T_MAX / 2)
        Py_RETURN_NONE; /* len(tape) // size puts the top below first: nothing to sweep */
    Py_ssize_t size = 2 * width;
    /* the pairs one entry reads: tape.py unrolls widths 1, 2 and 3, anything else as 4 */
    Py_ssize_t npairs = width <= 3 ? width : 4;
    Py_ssize_t entries = PyList_GET_SIZE(tape) / size;
    if (entries > 0 && first > PY_SSIZE_T_MAX - entries) {
        PyErr_SetString(PyExc_IndexError, "list index out of range");
        return NULL;
    }
    Py_ssize_t top = first + entries;
    while (top > first) {
        Py_ssize_t low = top - SWEEP_CHUNK > first ? top - SWEEP_CHUNK : first;
        /* reversed(tape): entry k reads the 2 * npairs items below the previous entry's */
        Py_ssize_t end = PyList_GET_SIZE(tape);
        for (Py_ssize_t k = top - 1; k >= low; k--) {
            if (end > PyList_GET_SIZE(tape) || end < 2 * npairs)
                break; /* reversed(tape) is exhausted (or its list shrank): zip stops */
            end -= 2 * npairs;
            PyObject *g = adjoint_at(adjoint, k);
            if (g == NULL)
                return NULL;
            PyObject *const *items = &PyList_GET_ITEM(tape, end);
            int status;
            if (PyFloat_CheckExact(g)) {
                double gv = PyFloat_AS_DOUBLE(g);
                if (gv == 0.0)
                    continue;
                status = update_pairs(adjoint, items, npairs, g, gv, 1);
            }
            else { /* the truth test may run Python code: hold the items first */
                PyObject *held[8];
                for (Py_ssize_t m = 0; m < 2 * npairs; m++)
                    held[m] = Py_NewRef(items[m]);
                Py_INCREF(g);
                status = is_nonzero(g);
                if (status > 0)
                    status = update_pairs(adjoint, held, npairs, g, 0.0, 0);
                Py_DECREF(g);
                for (Py_ssize_t m = 0; m < 2 * npairs; m++)
                    Py_DECREF(held[m]);
            }
            if (status < 0)
                return NULL;
        }
        /* del tape[(low - first) * size:] */
        if (PySequence_DelSlice(tape, (low - first) * size, PY_SSIZE_T_MAX) < 0)
            return NULL;
        top = low;
    }
    Py_RETURN_NONE;
}

/* -- the specialised code's checks of its arguments' kinds ----------------------------- */

static int
floats_in(PyObject *list) /* an exact list of exact floats */
{
    if (!PyList_CheckExact(list))
        return 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++)
        if (!PyFloat_CheckExact(PyList_GET_ITEM(list, i)))
            return 0;
    return 1;
}

PyDoc_STRVAR(floats_doc,
"floats(*values)\n--\n\n"
"value_kinds.floats, compiled: is every argument exactly a float?");

static PyObject *
native_floats(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    for (Py_ssize_t k = 0; k < nargs; k++)
        if (!PyFloat_CheckExact(args[k]))
            Py_RETURN_FALSE;
    Py_RETURN_TRUE;
}

PyDoc_STRVAR(float_lists_doc,
"float_lists(*lists)\n--\n\n"
"value_kinds.float_lists, compiled: is each argument a list of floats (exactly those types)?");

static PyObject *
native_float_lists(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    for (Py_ssize_t k = 0; k < nargs; k++)
        if (!floats_in(args[k]))
            Py_RETURN_FALSE;
    Py_RETURN_TRUE;
}

PyDoc_STRVAR(float_rows_doc,
"float_rows(*matrices)\n--\n\n"
"value_kinds.float_rows, compiled: is each argument a list of lists of floats, all with the\n"
"same number of rows and row r of the same length in each?");

static PyObject *
native_float_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs == 0)
        Py_RETURN_TRUE;
    for (Py_ssize_t k = 0; k < nargs; k++)
        if (!PyList_CheckExact(args[k]) || PyList_GET_SIZE(args[k]) != PyList_GET_SIZE(args[0]))
            Py_RETURN_FALSE;
    /* (no Python code runs here: the lists cannot change while they are read) */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(args[0]); i++) {
        PyObject *first = PyList_GET_ITEM(args[0], i);
        for (Py_ssize_t k = 0; k < nargs; k++) {
            PyObject *row = PyList_GET_ITEM(args[k], i);
            if (!floats_in(row) || PyList_GET_SIZE(row) != PyList_GET_SIZE(first))
                Py_RETURN_FALSE;
        }
    }
    Py_RETURN_TRUE;
}

/* -- the generated code's dependencies (codegen.Transformed.still_valid) --------------- */

PyDoc_STRVAR(unchanged_doc,
"unchanged(dependencies, missing)\n--\n\n"
"codegen.unchanged, compiled: is every (namespace, name, value) of the list still bound\n"
"so? A dict is read directly, a weak reference's object by its attribute name, any\n"
"other namespace through its get method.");

/* 1 unchanged, 0 changed, -1 an error (also used by _specialised.c) */
int
astad_unchanged(PyObject *dependencies, PyObject *missing)
{
    /* (a key's __eq__ may run Python code: the length is read again at each step and the
       item held while it is used) */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(dependencies); i++) {
        PyObject *dependency = PyList_GET_ITEM(dependencies, i);
        if (!PyTuple_CheckExact(dependency) || PyTuple_GET_SIZE(dependency) != 3) {
            PyErr_SetString(PyExc_TypeError, "a dependency is (namespace, name, value)");
            return -1;
        }
        Py_INCREF(dependency);
        PyObject *namespace = PyTuple_GET_ITEM(dependency, 0);
        PyObject *name = PyTuple_GET_ITEM(dependency, 1);
        PyObject *bound;
        if (PyDict_CheckExact(namespace)) {
            bound = PyDict_GetItemWithError(namespace, name); /* borrowed */
            if (bound == NULL && PyErr_Occurred()) {
                Py_DECREF(dependency);
                return -1;
            }
            Py_XINCREF(bound);
            if (bound == NULL) {
                bound = missing;
                Py_INCREF(bound);
            }
        }
        else if (PyWeakref_CheckRefExact(namespace)) { /* an attribute of a callee */
            PyObject *obj;
#if PY_VERSION_HEX >= 0x030D0000
            if (PyWeakref_GetRef(namespace, &obj) < 0) {
                Py_DECREF(dependency);
                return -1;
            }
#else
            obj = PyWeakref_GetObject(namespace); /* borrowed; Py_None once dead */
            obj = obj == Py_None ? NULL : (Py_INCREF(obj), obj);
#endif
            bound = NULL;
            if (obj != NULL) {
                bound = PyObject_GetAttr(obj, name);
                Py_DECREF(obj);
                if (bound == NULL) {
                    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
                        Py_DECREF(dependency);
                        return -1;
                    }
                    PyErr_Clear();
                }
            }
            if (bound == NULL) {
                bound = missing;
                Py_INCREF(bound);
            }
        }
        else {
            bound = PyObject_CallMethod(namespace, "get", "OO", name, missing);
            if (bound == NULL) {
                Py_DECREF(dependency);
                return -1;
            }
        }
        int same = bound == PyTuple_GET_ITEM(dependency, 2);
        Py_DECREF(bound);
        Py_DECREF(dependency);
        if (!same)
            return 0;
    }
    return 1;
}

static PyObject *
native_unchanged(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "unchanged(dependencies: list, missing)");
        return NULL;
    }
    int same = astad_unchanged(args[0], args[1]);
    return same < 0 ? NULL : PyBool_FromLong(same);
}

PyDoc_STRVAR(all_finite_doc,
"all_finite(array) -> bool or None\n\n"
"No inf or nan among the elements of a C-contiguous float64 or float32 array (read "
"through the buffer protocol); None for any other object, which the caller checks "
"itself (rules/array.all_finite is the reference).");

static PyObject *
native_all_finite(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!astad_check_nargs("all_finite", nargs, 1))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear(); /* (not contiguous, or no buffer: the caller's own check) */
        Py_RETURN_NONE;
    }
    const char *format = view.format == NULL ? "B" : view.format;
    if (format[0] == '=' || format[0] == '@' || format[0] == (PY_LITTLE_ENDIAN ? '<' : '>'))
        format++; /* (native byte order, which numpy may also spell '<' or '>') */
    int finite = -1;
    if (format[0] == 'd' && format[1] == '\0' && view.itemsize == sizeof(double)) {
        const double *x = (const double *)view.buf;
        Py_ssize_t n = view.len / (Py_ssize_t)sizeof(double);
        finite = 1;
        for (Py_ssize_t i = 0; i < n; i++)
            if (!isfinite(x[i])) {
                finite = 0;
                break;
            }
    }
    else if (format[0] == 'f' && format[1] == '\0' && view.itemsize == sizeof(float)) {
        const float *x = (const float *)view.buf;
        Py_ssize_t n = view.len / (Py_ssize_t)sizeof(float);
        finite = 1;
        for (Py_ssize_t i = 0; i < n; i++)
            if (!isfinite(x[i])) {
                finite = 0;
                break;
            }
    }
    PyBuffer_Release(&view);
    if (finite < 0)
        Py_RETURN_NONE;
    return PyBool_FromLong(finite);
}

static PyMethodDef native_methods[] = {
    {"all_finite", (PyCFunction)(void (*)(void))native_all_finite, METH_FASTCALL,
     all_finite_doc},
    {"float_lists", (PyCFunction)(void (*)(void))native_float_lists, METH_FASTCALL,
     float_lists_doc},
    {"floats", (PyCFunction)(void (*)(void))native_floats, METH_FASTCALL, floats_doc},
    {"float_rows", (PyCFunction)(void (*)(void))native_float_rows, METH_FASTCALL,
     float_rows_doc},
    {"sweep", (PyCFunction)(void (*)(void))native_sweep, METH_FASTCALL, sweep_doc},
    {"sweep_and_free", (PyCFunction)(void (*)(void))native_sweep_and_free, METH_FASTCALL,
     sweep_and_free_doc},
    {"sweep_flat", (PyCFunction)(void (*)(void))native_sweep_flat, METH_FASTCALL,
     sweep_flat_doc},
    {"unchanged", (PyCFunction)(void (*)(void))native_unchanged, METH_FASTCALL, unchanged_doc},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "astad.runtime._native",
    .m_doc = "The backward sweeps of astad.runtime.tape, compiled (same results, bit for bit), "
             "the specialised code's checks of its arguments (specialise/value_kinds.py) and of the bindings "
             "it was written for (compile/pipeline.py), SpecialisedCall (_specialised.c), the "
             "element-wise numpy rules (_elementwise.c), jvp on floats (_jvp.c) and the "
             "tape of the code for floats (_float_tape.c).",
    .m_size = -1,
    .m_methods = native_methods,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    PyObject *module = PyModule_Create(&native_module);
    if (module != NULL && (PyModule_AddIntConstant(module, "SWEEP_CHUNK", SWEEP_CHUNK) < 0 ||
                           astad_add_specialised_call(module) < 0 ||
                           astad_add_elementwise(module) < 0 ||
                           astad_add_compiled_jvp(module) < 0 ||
                           astad_add_float_tape(module) < 0))
        Py_CLEAR(module);
    return module;
}
