/* check_yschema.c — the field-schema layer: every kind of bad value reported at its line:col
 * with the schema's hint, defaults, required keys, duplicate keys, text setters, and the key
 * table printed from the same schema. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "protocols/base/yschema.h"

typedef struct demo {
    uint32_t layers;
    uint64_t big;
    int threads;
    double eps;
    int tied;
    char name[8];
    int act;
} demo;

static const char *const acts[] = {"gelu", "swiglu", NULL};

static const ys_field demo_fields[] = {
    {"format", YS_FIXED, YS_NONE, 0, 0, "demo 1", "file format", NULL, YS_REQ,
     "regenerate the file", NULL},
    {"name", YS_STR, YS_AT(demo, name), 0, 0, "x", "a short name", NULL, 0, NULL, NULL},
    {"layers", YS_U32, YS_AT(demo, layers), 1, 1000, NULL, "blocks", NULL, YS_REQ, NULL, NULL},
    {"big", YS_U64, YS_AT(demo, big), 0, 0, "7", "any unsigned", NULL, 0, NULL, NULL},
    {"threads", YS_INT, YS_AT(demo, threads), -4, 4096, "1", "cores", NULL, 0, NULL, NULL},
    {"eps", YS_DBL, YS_AT(demo, eps), 0, 1, "1e-5", "epsilon", NULL, 0, NULL, NULL},
    {"tied", YS_BOOL, YS_AT(demo, tied), 0, 0, "false", "tie them", NULL, 0, NULL, NULL},
    {"activation", YS_ENUM, YS_AT(demo, act), 0, 0, "swiglu", "the FFN gate", acts, 0,
     "gelu for GPT-2, swiglu for Llama", NULL},
    {"cpu", YS_INFO, YS_NONE, 0, 0, NULL, "informational", NULL, 0, NULL, NULL},
    {"links", YS_OTHER, YS_NONE, 0, 0, NULL, "per-link overrides", NULL, 0, NULL, "mapping"},
};
static const ys_schema demo_schema = YS_SCHEMA("demo", demo_fields, "tests/check_yschema.c");

static int read_text(const char *text, demo *d, errbuf *e)
{
    yx_node *root;
    int rc = yx_parse("d.yaml", text, strlen(text), &root, e);
    if (rc)
        return rc;
    ys_ctx x = {"d.yaml", e, 0};
    memset(d, 0xA5, sizeof *d);
    rc = ys_defaults(&demo_schema, d);
    ck_assert_int_eq(rc, MS_OK);
    rc = ys_read(&x, root, &demo_schema, NULL, 0, d);
    yx_free(root);
    return rc;
}

#define OK_HEAD "format: demo 1\nlayers: 4\n" /* lines 1-2 */

typedef th_bad bad_case;

static const bad_case bad_cases[] = {
    {OK_HEAD "layesr: 5\n", "d.yaml:3:1: error: ", "unknown key 'layesr' in 'demo'",
     "did you mean 'layers'?"},
    {OK_HEAD "zzzzzz: 5\n", "d.yaml:3:1: error: ", "unknown key 'zzzzzz' in 'demo'",
     "keys of 'demo': format name layers"},
    {OK_HEAD "eps: 1\neps: 2\n", "d.yaml:4:1: error: ", "duplicate key 'eps'", "line 3:1"},
    {"format: demo 2\nlayers: 4\n", "d.yaml:1:9: error: ", "unsupported format 'demo 2'",
     "regenerate the file"},
    {"layers: 4\n", "d.yaml:1:1: error: ", "missing required key 'format' in 'demo'",
     "add 'format: demo 1'"},
    {"format: demo 1\n", "d.yaml:1:1: error: ", "missing required key 'layers' in 'demo'",
     "blocks"},
    {OK_HEAD "eps: 2\n", "d.yaml:3:6: error: ", "'eps' = 2 is out of range", "between 0 and 1"},
    {OK_HEAD "eps: tiny\n", "d.yaml:3:6: error: ", "'eps' must be a number, not 'tiny'", NULL},
    {"format: demo 1\nlayers: 0\n", "d.yaml:2:9: error: ", "'layers' = 0 is out of range",
     "between 1 and 1000"},
    {"format: demo 1\nlayers: -3\n", "d.yaml:2:9: error: ", "'layers' = -3 is out of range", NULL},
    {"format: demo 1\nlayers: 2.5\n", "d.yaml:2:9: error: ", "'layers' must be an integer", NULL},
    {OK_HEAD "big: 18446744073709551616\n", "d.yaml:3:6: error: ", "'big' must be an integer",
     NULL},
    {OK_HEAD "threads: -5\n", "d.yaml:3:10: error: ", "'threads' = -5 is out of range",
     "between -4 and 4096"},
    {OK_HEAD "tied: maybe\n", "d.yaml:3:7: error: ", "'tied' must be true or false", NULL},
    {OK_HEAD "name: toolongname\n", "d.yaml:3:7: error: ", "'name' is longer than 7", NULL},
    {OK_HEAD "name: [a, b]\n", "d.yaml:3:7: error: ", "'name' must be a string, not a list", NULL},
    {OK_HEAD "name:\n", "d.yaml:3:6: error: ", "'name' has no value", NULL},
    {OK_HEAD "activation: swigul\n", "d.yaml:3:13: error: ",
     "unknown 'activation' value 'swigul' (did you mean 'swiglu'?)", "one of: gelu swiglu"},
    {"- a\n- b\n", "d.yaml:1:1: error: ", "a demo is a mapping of keys, not a list", NULL},
};
#define N_BAD (sizeof bad_cases / sizeof *bad_cases)

START_TEST(test_bad)
{
    const bad_case *c = &bad_cases[_i];
    demo d;
    errbuf e = {{0}};
    int rc = read_text(c->text, &d, &e);
    ck_assert_msg(rc == MS_ERR_INPUT, "case %d: rc %d (%s)", _i, rc, e.msg);
    th_bad_msg("", c, e.msg, _i);
}
END_TEST

START_TEST(test_defaults_and_values)
{
    demo d;
    errbuf e = {{0}};
    ck_assert_int_eq(read_text(OK_HEAD "cpu: [any, thing]\nlinks: {a: 1}\n", &d, &e), MS_OK);
    ck_assert_uint_eq(d.layers, 4);
    ck_assert_uint_eq(d.big, 7);
    ck_assert_int_eq(d.threads, 1);
    ck_assert_double_eq(d.eps, 1e-5);
    ck_assert_int_eq(d.tied, 0);
    ck_assert_str_eq(d.name, "x");
    ck_assert_int_eq(d.act, 1);
    ck_assert_int_eq(read_text(OK_HEAD "name: abc\nbig: 18446744073709551615\nthreads: -4\n"
                                       "eps: 0.5\ntied: yes\nactivation: gelu\n",
                               &d, &e),
                     MS_OK);
    ck_assert_str_eq(d.name, "abc");
    ck_assert_uint_eq(d.big, UINT64_MAX);
    ck_assert_int_eq(d.threads, -4);
    ck_assert_double_eq(d.eps, 0.5);
    ck_assert_int_eq(d.tied, 1);
    ck_assert_int_eq(d.act, 0);
}
END_TEST

START_TEST(test_extra_keys_and_text)
{
    yx_node *root;
    errbuf e = {{0}};
    const char *t = OK_HEAD "base: llama\n";
    ck_assert_int_eq(yx_parse("d.yaml", t, strlen(t), &root, &e), MS_OK);
    ys_ctx x = {"d.yaml", &e, MS_ERR_FORMAT};
    demo d;
    ys_defaults(&demo_schema, &d);
    ck_assert_int_eq(ys_read(&x, root, &demo_schema, NULL, 0, &d), MS_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "keys of 'demo': format"));
    static const char *const extra[] = {"base"};
    ck_assert_int_eq(ys_read(&x, root, &demo_schema, extra, 1, &d), MS_OK);
    yx_free(root);
    /* text setters: no location, the same checks */
    const ys_field *f = ys_find(&demo_schema, "layers");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(ys_set_text(f, "12", &d, &e), MS_OK);
    ck_assert_uint_eq(d.layers, 12);
    ck_assert_int_eq(ys_set_text(f, "1001", &d, &e), MS_ERR_INPUT);
    ck_assert_str_eq(e.msg, "'layers' = 1001 is out of range\n  hint: 'layers' must be between 1 "
                            "and 1000");
    demo d2 = d;
    ck_assert(ys_field_equal(f, &d, &d2));
    d2.layers++;
    ck_assert(!ys_field_equal(f, &d, &d2));
    ck_assert_ptr_null(ys_find(&demo_schema, "nope"));
}
END_TEST

START_TEST(test_print)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(ys_print(f, &demo_schema), MS_OK);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "keys of 'demo' (tests/check_yschema.c):"));
    /* one row per field, each within 80 columns */
    size_t rows = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        ck_assert_msg(strlen(line) <= 80, "line longer than 80 columns: '%s'", line);
        rows++;
    }
    ck_assert_uint_ge(rows, 2 + demo_schema.n);
    free(buf);
    char t[128];
    ys_type_text(ys_find(&demo_schema, "layers"), t, sizeof t);
    ck_assert_str_eq(t, "integer 1..1000");
    ys_type_text(ys_find(&demo_schema, "activation"), t, sizeof t);
    ck_assert_str_eq(t, "gelu|swiglu");
    ys_type_text(ys_find(&demo_schema, "links"), t, sizeof t);
    ck_assert_str_eq(t, "mapping");
}
END_TEST

/* Aliases are copies: a small document that expands past the node bound is refused at the
 * alias that crosses it, and so is a file longer than the read bound (an endless device). */
START_TEST(test_alias_bomb_and_size)
{
    char bomb[2048] = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
    for (char c = 'b'; c <= 'i'; c++) /* nine levels of ten: 10^9 scalars if expanded */
        snprintf(bomb + strlen(bomb), sizeof bomb - strlen(bomb),
                 "%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n", c, c, c - 1, c - 1,
                 c - 1, c - 1, c - 1, c - 1, c - 1, c - 1, c - 1, c - 1);
    ck_assert_uint_lt(strlen(bomb), 700);
    yx_node *root = NULL;
    errbuf e;
    ck_assert_int_eq(yx_parse("b.yaml", bomb, strlen(bomb), &root, &e), MS_ERR_INPUT);
    ck_assert_ptr_null(root);
    ck_assert_msg(strstr(e.msg, "b.yaml:5:") && strstr(e.msg, "grows past 100000 nodes"), "%s",
                  e.msg);
    /* the same shape, four levels deep, is ordinary YAML */
    char *cut = strstr(bomb, "\ne:");
    cut[1] = '\0';
    ck_assert_int_eq(yx_parse("b.yaml", bomb, strlen(bomb), &root, &e), MS_OK);
    ck_assert_uint_eq(yx_map_get(root, "d")->n, 10);
    yx_free(root);
    /* a file without end */
    ck_assert_int_eq(yx_parse_file("/dev/zero", &root, &e), MS_ERR_INPUT);
    ck_assert_msg(strstr(e.msg, "/dev/zero: error: larger than 64 MiB"), "%s", e.msg);
}
END_TEST

Suite *yschema_suite(void)
{
    Suite *s = suite_create("yschema");
    TCase *t = th_case(s, "schema", 0);
    TH_LOOPS(t, (int)N_BAD, test_bad);
    TH_TESTS(t, test_defaults_and_values, test_extra_keys_and_text, test_print,
             test_alias_bomb_and_size);
    return s;
}
