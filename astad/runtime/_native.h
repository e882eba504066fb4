/* astad's C runtime (astad.runtime._native): the functions its files share, and what it
 * reads of Python objects. tape.py, compile/entry.py, api/diff.py and api/transforms.py
 * hold the Python references and name these attributes; a rename there must be made here
 * too (the objects are checked when they are handed over: a mismatch is an error at
 * import, never a silent fall back to the Python path).
 *
 * Files: _native.c (the sweeps, unchanged(), float_lists/float_rows/floats, all_finite,
 * the thread state), _specialised.c (SpecialisedCall), _elementwise.c (the compiled
 * element-wise rules), _jvp.c (CompiledJvp), _float_tape.c (FloatTape, float_adjoints).
 *
 * What is read, by name:
 * - an entry (compile/entry.py: Entry): ``function`` (a weak reference), ``code``,
 *   ``dependencies`` (a list of (namespace, name, value): transform/bindings.py),
 *   ``tapeless``, ``tapes``, ``arity``, ``forward_unchecked``;
 * - a DiffFunction (api/diff.py), a SpecialisedCall's owner: ``entry``, ``fn``,
 *   ``selection(n_args)``;
 * - an astad.grad (api/transforms.py): ``hvp_known``, None or an HvpKnown (api/hvp.py),
 *   a named tuple read by position: (function, entry, floats, arity, code, dependencies,
 *   positions, single); CompiledJvp checks its fields when it is made;
 * - the registry (astad/registry.py): RECORDS, by identity of the record an element-wise
 *   rule was configured with (rules/array.py: _compiled_elementwise);
 * - duals.running: ``stack`` and ``depth``, per thread (astad_thread_state).
 */
#ifndef ASTAD_NATIVE_H
#define ASTAD_NATIVE_H

#include <Python.h>

/* _native.c */
int astad_check_nargs(const char *name, Py_ssize_t nargs, Py_ssize_t expected);
PyObject *astad_thread_state(PyObject *running, const char *name);
int astad_unchanged(PyObject *dependencies, PyObject *missing);
int astad_differentiating(PyObject *running);

/* _elementwise.c */
int astad_elementwise_backward(PyObject *e, PyObject *arrays, Py_ssize_t k);
int astad_add_elementwise(PyObject *module);

/* _specialised.c */
int astad_add_specialised_call(PyObject *module);

/* _jvp.c */
int astad_add_compiled_jvp(PyObject *module);

/* _float_tape.c */
int astad_add_float_tape(PyObject *module);

#endif
