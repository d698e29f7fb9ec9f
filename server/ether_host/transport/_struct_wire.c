/* google.protobuf Struct / Value wire bytes <-> Python values, in C.
 *
 * Why by hand: the Struct path (what grpcurl and most clients send) converted in Python costs
 * ~22 us to read a 1 KB params Struct and ~21 us to write a result Value, in-process, and about
 * 35 us each inside a busy host (bench/RESULTS.md, "Ether against the floor"): upb's Python API
 * makes a wrapper object per value, whichever way it is called, and protobuf's Python package
 * has no Struct <-> JSON conversion outside Python (json_format is Python and slower; bufbuild's
 * native codec measured 27 and 29 us). Here the host hands upb the message's own bytes
 * (SerializeToString / MergeFromString, C) and this module walks them: a few us each.
 *
 * struct_values.py is the reference and the fallback (a machine that cannot build this module
 * runs it); tests/host/test_convert.py holds both to the same table and to json_format. The
 * rules are that module's:
 *   - a number is a double; an integral one below 2^53 in magnitude is read back as an int;
 *   - NaN and the infinities pass as doubles; an unset Value reads as null;
 *   - an empty object or list stays an object or list;
 *   - a dict key that is not text is written as its str(); a value of another type (a
 *     subclass, a date) is handed to the Python hook `other`, which returns its plain form or
 *     raises (TypeError: no Struct form).
 *   - nesting is bounded as value_levels.py says: an object takes OBJECT levels, a list LIST,
 *     past MAX the hook `too_deep` (ValueTooDeep) is raised.
 *
 * Reading takes the bytes upb wrote for a message it parsed (each field once, UTF-8 checked,
 * nesting under upb's 100 levels); it still checks every length and refuses what is malformed
 * (ValueError) rather than trusting it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAX_EXACT 9007199254740992.0 /* 2^53 */
#define MAX_READ_DEPTH 200           /* past upb's own bound: malformed input, not a value */

/* Set once by configure(): the bound and the Python side of the rules. */
static int object_levels = 3, list_levels = 2, max_levels = 90;
static PyObject *too_deep = NULL; /* the exception class raised past max_levels */
static PyObject *other = NULL;    /* callable: a value of another type -> its plain form */

/* ---- reading ------------------------------------------------------------------------------ */

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} Reader;

static int malformed(void) {
    PyErr_SetString(PyExc_ValueError, "malformed google.protobuf.Struct bytes");
    return -1;
}

static int read_varint(Reader *r, uint64_t *out) {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end)
            return malformed();
        uint8_t byte = *r->p++;
        value |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *out = value;
            return 0;
        }
    }
    return malformed();
}

/* A length-delimited field's body: [*start, *start + *size). */
static int read_bytes(Reader *r, const uint8_t **start, Py_ssize_t *size) {
    uint64_t length;
    if (read_varint(r, &length) < 0)
        return -1;
    if (length > (uint64_t)(r->end - r->p))
        return malformed();
    *start = r->p;
    *size = (Py_ssize_t)length;
    r->p += length;
    return 0;
}

static int skip_field(Reader *r, uint32_t wire_type) {
    uint64_t ignored;
    const uint8_t *start;
    Py_ssize_t size;
    switch (wire_type) {
    case 0:
        return read_varint(r, &ignored);
    case 1:
        if (r->end - r->p < 8)
            return malformed();
        r->p += 8;
        return 0;
    case 2:
        return read_bytes(r, &start, &size);
    case 5:
        if (r->end - r->p < 4)
            return malformed();
        r->p += 4;
        return 0;
    default: /* groups: no Struct has one */
        return malformed();
    }
}

static PyObject *read_struct(const uint8_t *p, Py_ssize_t size, int depth);
static PyObject *read_list(const uint8_t *p, Py_ssize_t size, int depth);

static PyObject *number(double value) {
    if (isfinite(value) && value == floor(value) && fabs(value) < MAX_EXACT)
        return PyLong_FromLongLong((long long)value);
    return PyFloat_FromDouble(value);
}

/* A Value message's body as a Python value; the last member of its oneof wins. */
static PyObject *read_value(const uint8_t *p, Py_ssize_t size, int depth) {
    Reader r = {p, p + size};
    PyObject *result = NULL;
    if (depth > MAX_READ_DEPTH) {
        malformed();
        return NULL;
    }
    while (r.p < r.end) {
        uint64_t tag, varint;
        const uint8_t *start;
        Py_ssize_t length;
        PyObject *item = NULL;
        if (read_varint(&r, &tag) < 0)
            goto fail;
        uint32_t field = (uint32_t)(tag >> 3), wire_type = (uint32_t)(tag & 7);
        if (field == 1 && wire_type == 0) { /* null_value */
            if (read_varint(&r, &varint) < 0)
                goto fail;
            item = Py_NewRef(Py_None);
        } else if (field == 2 && wire_type == 1) { /* number_value */
            double value;
            if (r.end - r.p < 8) {
                malformed();
                goto fail;
            }
            memcpy(&value, r.p, 8); /* little-endian on every machine we build for */
            r.p += 8;
            item = number(value);
        } else if (field == 3 && wire_type == 2) { /* string_value */
            if (read_bytes(&r, &start, &length) < 0)
                goto fail;
            item = PyUnicode_DecodeUTF8((const char *)start, length, NULL);
        } else if (field == 4 && wire_type == 0) { /* bool_value */
            if (read_varint(&r, &varint) < 0)
                goto fail;
            item = PyBool_FromLong(varint != 0);
        } else if (field == 5 && wire_type == 2) { /* struct_value */
            if (read_bytes(&r, &start, &length) < 0)
                goto fail;
            item = read_struct(start, length, depth + 1);
        } else if (field == 6 && wire_type == 2) { /* list_value */
            if (read_bytes(&r, &start, &length) < 0)
                goto fail;
            item = read_list(start, length, depth + 1);
        } else {
            if (skip_field(&r, wire_type) < 0)
                goto fail;
            continue;
        }
        if (item == NULL)
            goto fail;
        Py_XSETREF(result, item);
    }
    return result != NULL ? result : Py_NewRef(Py_None);
fail:
    Py_XDECREF(result);
    return NULL;
}

/* One map entry of a Struct (key 1, value 2) into `out`. */
static int read_entry(PyObject *out, const uint8_t *p, Py_ssize_t size, int depth) {
    Reader r = {p, p + size};
    const uint8_t *key_start = NULL, *value_start = NULL;
    Py_ssize_t key_size = 0, value_size = 0;
    while (r.p < r.end) {
        uint64_t tag;
        if (read_varint(&r, &tag) < 0)
            return -1;
        uint32_t field = (uint32_t)(tag >> 3), wire_type = (uint32_t)(tag & 7);
        if (field == 1 && wire_type == 2) {
            if (read_bytes(&r, &key_start, &key_size) < 0)
                return -1;
        } else if (field == 2 && wire_type == 2) {
            if (read_bytes(&r, &value_start, &value_size) < 0)
                return -1;
        } else if (skip_field(&r, wire_type) < 0) {
            return -1;
        }
    }
    PyObject *key = PyUnicode_DecodeUTF8(key_start ? (const char *)key_start : "", key_size, NULL);
    if (key == NULL)
        return -1;
    PyObject *value = value_start ? read_value(value_start, value_size, depth)
                                  : Py_NewRef(Py_None);
    if (value == NULL) {
        Py_DECREF(key);
        return -1;
    }
    int failed = PyDict_SetItem(out, key, value);
    Py_DECREF(key);
    Py_DECREF(value);
    return failed;
}

/* Calls `each` with the body of every field of tag `wanted` in [p, p + size), in order,
 * skipping the others: a Struct's map entries, a ListValue's values, a repeated Value field. */
typedef int (*EachField)(PyObject *out, const uint8_t *p, Py_ssize_t size, int depth);

static int for_each_field(const uint8_t *p, Py_ssize_t size, uint64_t wanted, EachField each,
                          PyObject *out, int depth) {
    Reader r = {p, p + size};
    while (r.p < r.end) {
        uint64_t tag;
        const uint8_t *start;
        Py_ssize_t length;
        if (read_varint(&r, &tag) < 0)
            return -1;
        if (tag == wanted) {
            if (read_bytes(&r, &start, &length) < 0 || each(out, start, length, depth) < 0)
                return -1;
        } else if (skip_field(&r, (uint32_t)(tag & 7)) < 0) {
            return -1;
        }
    }
    return 0;
}

static PyObject *read_struct(const uint8_t *p, Py_ssize_t size, int depth) {
    PyObject *out = PyDict_New();
    if (out != NULL && for_each_field(p, size, (1 << 3) | 2, read_entry, out, depth) < 0)
        Py_CLEAR(out);
    return out;
}

static int append_value(PyObject *out, const uint8_t *p, Py_ssize_t size, int depth) {
    PyObject *item = read_value(p, size, depth);
    if (item == NULL)
        return -1;
    int failed = PyList_Append(out, item);
    Py_DECREF(item);
    return failed;
}

/* Every Value of the field whose tag is `wanted` (a ListValue's values: 1; a message's repeated
 * Value field), in order, as a list. */
static PyObject *read_values(const uint8_t *p, Py_ssize_t size, uint64_t wanted, int depth) {
    PyObject *out = PyList_New(0);
    if (out != NULL && for_each_field(p, size, wanted, append_value, out, depth) < 0)
        Py_CLEAR(out);
    return out;
}

static PyObject *read_list(const uint8_t *p, Py_ssize_t size, int depth) {
    return read_values(p, size, (1 << 3) | 2, depth);
}

/* ---- writing ------------------------------------------------------------------------------ */

typedef struct {
    uint8_t *data;
    Py_ssize_t size;
    Py_ssize_t capacity;
} Buffer;

static int reserve(Buffer *b, Py_ssize_t more) {
    if (b->size + more <= b->capacity)
        return 0;
    Py_ssize_t capacity = b->capacity ? b->capacity : 256;
    while (capacity < b->size + more) {
        if (capacity > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        capacity *= 2;
    }
    uint8_t *data = PyMem_Realloc(b->data, (size_t)capacity);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->capacity = capacity;
    return 0;
}

static int varint_size(uint64_t value) {
    int size = 1;
    while (value >= 0x80) {
        value >>= 7;
        size++;
    }
    return size;
}

static void put_varint(uint8_t *at, uint64_t value) {
    while (value >= 0x80) {
        *at++ = (uint8_t)(value | 0x80);
        value >>= 7;
    }
    *at = (uint8_t)value;
}

/* A length-delimited field is written as: its tag, one byte kept for the length, the body;
 * then the length is put in, moving the body when it needs more than one byte (a body of
 * 128 bytes or more: the move costs less than measuring every body first). */
static Py_ssize_t open_field(Buffer *b, uint32_t tag) {
    if (reserve(b, 6) < 0)
        return -1;
    put_varint(b->data + b->size, tag);
    b->size += varint_size(tag);
    b->size++;
    return b->size;
}

static int close_field(Buffer *b, Py_ssize_t body_start) {
    uint64_t length = (uint64_t)(b->size - body_start);
    int extra = varint_size(length) - 1;
    if (extra) {
        if (reserve(b, extra) < 0)
            return -1;
        memmove(b->data + body_start + extra, b->data + body_start, (size_t)length);
        b->size += extra;
    }
    put_varint(b->data + body_start - 1, length);
    return 0;
}

static int write_text(Buffer *b, uint8_t tag, PyObject *text) {
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &size);
    if (utf8 == NULL)
        return -1;
    if (reserve(b, 1 + 10 + size) < 0)
        return -1;
    b->data[b->size++] = tag;
    put_varint(b->data + b->size, (uint64_t)size);
    b->size += varint_size((uint64_t)size);
    memcpy(b->data + b->size, utf8, (size_t)size);
    b->size += size;
    return 0;
}

static int write_struct_body(Buffer *b, PyObject *dict, int depth);
static int write_list_body(Buffer *b, PyObject *list, int depth);

static int deeper(int depth) {
    if (depth > max_levels) {
        PyErr_SetNone(too_deep);
        return -1;
    }
    return 0;
}

/* A Value's body for `value` (the members of its oneof: null 1, number 2, string 3, bool 4,
 * struct 5, list 6); `depth` is the protobuf levels above it. */
static int write_value_body(Buffer *b, PyObject *value, int depth) {
    PyTypeObject *type = Py_TYPE(value);
    if (type == &PyUnicode_Type)
        return write_text(b, (3 << 3) | 2, value);
    if (type == &PyFloat_Type || type == &PyLong_Type) {
        double number = type == &PyFloat_Type ? PyFloat_AS_DOUBLE(value) : PyLong_AsDouble(value);
        if (number == -1.0 && PyErr_Occurred()) /* an int no double holds: OverflowError */
            return -1;
        if (reserve(b, 9) < 0)
            return -1;
        b->data[b->size++] = (2 << 3) | 1;
        memcpy(b->data + b->size, &number, 8);
        b->size += 8;
        return 0;
    }
    if (type == &PyDict_Type) {
        if (deeper(depth + object_levels) < 0)
            return -1;
        Py_ssize_t body = open_field(b, (5 << 3) | 2);
        if (body < 0 || write_struct_body(b, value, depth + object_levels) < 0)
            return -1;
        return close_field(b, body);
    }
    if (type == &PyBool_Type) {
        if (reserve(b, 2) < 0)
            return -1;
        b->data[b->size++] = (4 << 3) | 0;
        b->data[b->size++] = value == Py_True;
        return 0;
    }
    if (value == Py_None) {
        if (reserve(b, 2) < 0)
            return -1;
        b->data[b->size++] = (1 << 3) | 0;
        b->data[b->size++] = 0;
        return 0;
    }
    if (type == &PyList_Type) {
        if (deeper(depth + list_levels) < 0)
            return -1;
        Py_ssize_t body = open_field(b, (6 << 3) | 2);
        if (body < 0 || write_list_body(b, value, depth + list_levels) < 0)
            return -1;
        return close_field(b, body);
    }
    /* Anything else: its plain form from Python (a tuple's list, a subclass's base value, a
     * date's text), written by the rules above, or the hook's TypeError. */
    PyObject *plain = PyObject_CallOneArg(other, value);
    if (plain == NULL)
        return -1;
    PyTypeObject *plain_type = Py_TYPE(plain);
    if (plain_type != &PyUnicode_Type && plain_type != &PyFloat_Type &&
        plain_type != &PyLong_Type && plain_type != &PyDict_Type &&
        plain_type != &PyBool_Type && plain != Py_None && plain_type != &PyList_Type) {
        Py_DECREF(plain);
        PyErr_SetString(PyExc_TypeError, "the `other` hook returned a value with no plain form");
        return -1;
    }
    int failed = write_value_body(b, plain, depth);
    Py_DECREF(plain);
    return failed;
}

static int write_struct_body(Buffer *b, PyObject *dict, int depth) {
    Py_ssize_t position = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &position, &key, &value)) {
        Py_ssize_t entry = open_field(b, (1 << 3) | 2);
        if (entry < 0)
            return -1;
        if (PyUnicode_CheckExact(key)) {
            if (write_text(b, (1 << 3) | 2, key) < 0)
                return -1;
        } else {
            PyObject *text = PyObject_Str(key);
            if (text == NULL)
                return -1;
            int failed = write_text(b, (1 << 3) | 2, text);
            Py_DECREF(text);
            if (failed < 0)
                return -1;
        }
        /* The value's own depth is the entry's (its Value is the third level an object takes,
         * counted in `depth` already). */
        Py_INCREF(value); /* the dict may change under a hook's Python code */
        Py_ssize_t body = open_field(b, (2 << 3) | 2);
        int failed = body < 0 || write_value_body(b, value, depth) < 0 || close_field(b, body) < 0;
        Py_DECREF(value);
        if (failed || close_field(b, entry) < 0)
            return -1;
    }
    return 0;
}

/* Each item of a list or tuple as a Value in a field of tag `tag` (a ListValue's values: 1). */
static int write_values(Buffer *b, PyObject *items, uint32_t tag, int depth) {
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(items); i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(items, i);
        Py_INCREF(item); /* the list may change under a hook's Python code */
        Py_ssize_t body = open_field(b, tag);
        int failed = body < 0 || write_value_body(b, item, depth) < 0 || close_field(b, body) < 0;
        Py_DECREF(item);
        if (failed)
            return -1;
    }
    return 0;
}

static int write_list_body(Buffer *b, PyObject *list, int depth) {
    return write_values(b, list, (1 << 3) | 2, depth);
}

static PyObject *finish(Buffer *b, int failed) {
    PyObject *out = failed ? NULL : PyBytes_FromStringAndSize((const char *)b->data, b->size);
    PyMem_Free(b->data);
    return out;
}

static int configured(void) {
    if (too_deep == NULL || other == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_struct_wire.configure() was not called");
        return 0;
    }
    return 1;
}

/* ---- the module's functions -------------------------------------------------------------- */

static PyObject *struct_to_dict(PyObject *module, PyObject *data) {
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *out = read_struct(view.buf, view.len, 0);
    PyBuffer_Release(&view);
    return out;
}

static PyObject *value_to_python(PyObject *module, PyObject *data) {
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *out = read_value(view.buf, view.len, 0);
    PyBuffer_Release(&view);
    return out;
}

static PyObject *value_bytes(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    int depth = 0;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "value_bytes(value, depth=0)");
        return NULL;
    }
    if (nargs == 2 && (depth = PyLong_AsLong(args[1])) == -1 && PyErr_Occurred())
        return NULL;
    if (!configured())
        return NULL;
    Buffer b = {NULL, 0, 0};
    return finish(&b, write_value_body(&b, args[0], depth));
}

static PyObject *struct_bytes(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    int depth = 0;
    if (nargs < 1 || nargs > 2 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "struct_bytes(dict, depth=0)");
        return NULL;
    }
    if (nargs == 2 && (depth = PyLong_AsLong(args[1])) == -1 && PyErr_Occurred())
        return NULL;
    if (!configured())
        return NULL;
    depth += object_levels;
    if (deeper(depth) < 0)
        return NULL;
    Buffer b = {NULL, 0, 0};
    return finish(&b, write_struct_body(&b, args[0], depth));
}

/* The tag of a repeated Value field of a message, from the field's number. */
static int value_field_tag(PyObject *number, uint32_t *tag) {
    long field = PyLong_AsLong(number);
    if (field == -1 && PyErr_Occurred())
        return -1;
    if (field < 1 || field > 536870911) {
        PyErr_SetString(PyExc_ValueError, "a field number is 1 to 2^29 - 1");
        return -1;
    }
    *tag = ((uint32_t)field << 3) | 2;
    return 0;
}

static PyObject *repeated_values(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    uint32_t wanted;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "repeated_values(message_bytes, field_number)");
        return NULL;
    }
    if (value_field_tag(args[1], &wanted) < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *out = read_values(view.buf, view.len, wanted, 0);
    PyBuffer_Release(&view);
    return out;
}

static PyObject *repeated_value_bytes(PyObject *module, PyObject *const *args,
                                      Py_ssize_t nargs) {
    uint32_t tag;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "repeated_value_bytes(items, field_number)");
        return NULL;
    }
    if (value_field_tag(args[1], &tag) < 0 || !configured())
        return NULL;
    PyObject *items = PySequence_Fast(args[0], "repeated_value_bytes: items must be a sequence");
    if (items == NULL)
        return NULL;
    Buffer b = {NULL, 0, 0};
    int failed = write_values(&b, items, tag, 0);
    Py_DECREF(items);
    return finish(&b, failed);
}

static PyObject *configure(PyObject *module, PyObject *args) {
    PyObject *exception, *hook;
    if (!PyArg_ParseTuple(args, "iiiOO", &object_levels, &list_levels, &max_levels, &exception,
                          &hook))
        return NULL;
    Py_XSETREF(too_deep, Py_NewRef(exception));
    Py_XSETREF(other, Py_NewRef(hook));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"struct_to_dict", struct_to_dict, METH_O,
     "A Struct's wire bytes as a dict (SerializeToString's output)."},
    {"value_to_python", value_to_python, METH_O, "A Value's wire bytes as a Python value."},
    {"value_bytes", (PyCFunction)(void (*)(void))value_bytes, METH_FASTCALL,
     "value_bytes(value, depth=0): the wire bytes of a Value holding `value`."},
    {"struct_bytes", (PyCFunction)(void (*)(void))struct_bytes, METH_FASTCALL,
     "struct_bytes(dict, depth=0): the wire bytes of a Struct holding the dict's items."},
    {"repeated_values", (PyCFunction)(void (*)(void))repeated_values, METH_FASTCALL,
     "repeated_values(message_bytes, field_number): a repeated Value field's items."},
    {"repeated_value_bytes", (PyCFunction)(void (*)(void))repeated_value_bytes, METH_FASTCALL,
     "repeated_value_bytes(items, field_number): the items as a repeated Value field's bytes."},
    {"configure", configure, METH_VARARGS,
     "configure(object_levels, list_levels, max_levels, too_deep, other)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_struct_wire",
    .m_doc = "google.protobuf Struct / Value wire bytes <-> Python values (see struct_values.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__struct_wire(void) { return PyModule_Create(&module_def); }
