/* check_opt.c — the table-driven option parser (sim/cli/opt.h): every kind parses and checks its
 * value, long/short/bundled options and positionals, each error's message, and --help's layout. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sim/cli/opt.h"

typedef struct vals {
    int flag, choice, ival, seen_u;
    const char *str;
    uint32_t u;
    unsigned long long big;
    double x;
    const char *items[2];
    cli_list list;
    char fn_got[16];
} vals;

static int take_upper(const cli_opt *o, const char *arg, errbuf *e)
{
    if (arg[0] < 'A' || arg[0] > 'Z')
        return err_set(e, MS_ERR_USAGE, "--%s wants a capital, not '%s'", o->name, arg);
    snprintf(((vals *)o->dest)->fn_got, 16, "%s", arg);
    return MS_OK;
}

static vals V;
static const cli_opt opts[] = {
    {.name = "flag", .short_name = 'f', .kind = CLI_FLAG, .dest = &V.flag, .help = "a flag"},
    {.name = "name",
     .short_name = 'n',
     .kind = CLI_STR,
     .dest = &V.str,
     .arg = "S",
     .help = "a string\nits second line"},
    {.name = "count",
     .short_name = 'c',
     .kind = CLI_U32,
     .dest = &V.u,
     .arg = "N",
     .help = "a count",
     .lo = 1,
     .seen = &V.seen_u},
    {.name = "level",
     .kind = CLI_INT,
     .dest = &V.ival,
     .arg = "L",
     .help = "a level",
     .hi = 2,
     .want = "0, 1 or 2"},
    {.name = "bytes", .kind = CLI_U64, .dest = &V.big, .arg = "B", .help = "bytes", .hi = 1e6},
    {.name = "ratio", .kind = CLI_F64, .dest = &V.x, .arg = "X", .help = "a ratio", .hi = 1},
    {.name = "phase",
     .kind = CLI_CHOICE,
     .dest = &V.choice,
     .arg = "PH",
     .help = "prefill or decode",
     .choices = "prefill|decode|both"},
    {.name = "set",
     .short_name = 's',
     .kind = CLI_LIST,
     .dest = &V.list,
     .arg = "K=V",
     .help = "repeatable"},
    {.name = "upper",
     .kind = CLI_FN,
     .dest = &V,
     .arg = "U",
     .help = "a capital",
     .fn = take_upper},
    {.name = "a-very-long-option-name",
     .kind = CLI_FLAG,
     .dest = &V.flag,
     .help = "past the column"},
    {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "this help"},
};
static const cli_cmd cmd = {"demo", opts, sizeof opts / sizeof opts[0], 24, 1};

static int parse(int argc, const char *const *args, const char **pos, int *np, errbuf *e)
{
    memset(&V, 0, sizeof V);
    V.list = (cli_list){V.items, 0, 2};
    char *argv[24];
    argv[0] = (char *)"demo";
    for (int i = 0; i < argc; i++)
        argv[i + 1] = (char *)args[i];
    return cli_parse(&cmd, argc + 1, argv, pos, np, e);
}

START_TEST(test_values)
{
    const char *args[] = {"-f",        "--name",  "x y",     "-c",      "7",
                          "--level=2", "--bytes", "1000000", "--ratio", "0.25",
                          "--phase",   "decode",  "-s",      "a=1",     "--set",
                          "b=2",       "--upper", "Q",       "file"};
    const char *pos[1];
    int np = -1;
    errbuf e = {0};
    ck_assert_int_eq(parse(19, args, pos, &np, &e), MS_OK);
    ck_assert_int_eq(V.flag, 1);
    ck_assert_str_eq(V.str, "x y");
    ck_assert_uint_eq(V.u, 7);
    ck_assert_int_eq(V.seen_u, 1);
    ck_assert_int_eq(V.ival, 2);
    ck_assert_uint_eq(V.big, 1000000);
    ck_assert(V.x == 0.25);
    ck_assert_int_eq(V.choice, 1);
    ck_assert_int_eq(V.list.n, 2);
    ck_assert_str_eq(V.items[0], "a=1");
    ck_assert_str_eq(V.items[1], "b=2");
    ck_assert_str_eq(V.fn_got, "Q");
    ck_assert_int_eq(np, 1);
    ck_assert_str_eq(pos[0], "file");
}
END_TEST

START_TEST(test_bundled_and_order)
{
    /* a positional before the options, short options bundled with a value glued on */
    const char *args[] = {"file", "-fc3", "-nabc"};
    const char *pos[1];
    int np = 0;
    errbuf e = {0};
    ck_assert_int_eq(parse(3, args, pos, &np, &e), MS_OK);
    ck_assert_int_eq(V.flag, 1);
    ck_assert_uint_eq(V.u, 3);
    ck_assert_str_eq(V.str, "abc");
    ck_assert_int_eq(np, 1);
    ck_assert_str_eq(pos[0], "file");
    ck_assert_int_eq(V.seen_u, 1);
    ck_assert_int_eq(parse(0, args, pos, &np, &e), MS_OK);
    ck_assert_int_eq(np, 0);
    ck_assert_int_eq(V.seen_u, 0); /* not given: untouched */
}
END_TEST

/* Each bad command line and the message it gets. */
static const struct {
    int argc;
    const char *args[3];
    const char *msg;
} bad[] = {
    {1, {"--count"}, "option '--count' needs a value"},
    {1, {"--zzzzz"}, "unknown option '--zzzzz' (see mpcsim demo --help)"},
    {1, {"-x"}, "unknown option '-x' (see mpcsim demo --help)"},
    {1, {"--nmae"}, "unknown option '--nmae' (did you mean '--name'? see mpcsim demo --help)"},
    {1,
     {"--cuont=2"},
     "unknown option '--cuont=2' (did you mean '--count'? see mpcsim demo --help)"},
    {2, {"one", "two"}, "unexpected argument 'two'"},
    {2, {"-c", "0"}, "--count wants an integer >= 1, not '0'"},
    {2, {"-c", "4294967296"}, "--count wants an integer >= 1, not '4294967296'"},
    {2, {"-c", "3x"}, "--count wants an integer >= 1, not '3x'"},
    {2, {"--level", "3"}, "--level wants 0, 1 or 2, not '3'"},
    {2, {"--bytes", "1000001"}, "--bytes wants 0..1e+06, not '1000001'"},
    {2, {"--ratio", "nan"}, "--ratio wants 0..1, not 'nan'"},
    {2, {"--ratio", "-0.5"}, "--ratio wants 0..1, not '-0.5'"},
    {2, {"--phase", "pre"}, "--phase is prefill, decode or both, not 'pre'"},
    {3, {"-sa", "-sb", "-sc"}, "at most 2 --set options"},
    {2, {"--upper", "q"}, "--upper wants a capital, not 'q'"},
};

START_TEST(test_errors)
{
    const char *pos[1];
    int np;
    errbuf e = {0};
    ck_assert_int_eq(parse(bad[_i].argc, bad[_i].args, pos, &np, &e), MS_ERR_USAGE);
    ck_assert_str_eq(e.msg, bad[_i].msg);
}
END_TEST

START_TEST(test_help)
{
    const char *args[] = {"--flag", "-h", "--nope"};
    errbuf e = {0};
    ck_assert_int_eq(parse(3, args, NULL, NULL, &e), CLI_HELP_ASKED); /* stops at --help */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    cli_help(&cmd, f);
    fclose(f);
    const char *want = "  -f, --flag            a flag\n"
                       "  -n, --name S          a string\n"
                       "                        its second line\n"
                       "  -c, --count N         a count\n"
                       "      --level L         a level\n"
                       "      --bytes B         bytes\n"
                       "      --ratio X         a ratio\n"
                       "      --phase PH        prefill or decode\n"
                       "  -s, --set K=V         repeatable\n"
                       "      --upper U         a capital\n"
                       "      --a-very-long-option-name  past the column\n"
                       "  -h, --help            this help\n";
    ck_assert_str_eq(buf, want);
    free(buf);
}
END_TEST

Suite *opt_suite(void)
{
    Suite *s = suite_create("opt");
    TCase *tc = th_case(s, "opt", 0);
    TH_TESTS(tc, test_values, test_bundled_and_order);
    TH_LOOPS(tc, sizeof bad / sizeof bad[0], test_errors);
    TH_TESTS(tc, test_help);
    return s;
}
