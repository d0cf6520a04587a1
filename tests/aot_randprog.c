/*
 * aot_randprog.c -- writes random case SEED of the differential
 * generator (randprog.h, the programs and tensors of test_diff.c) for
 * tests/test_compile.sh, which compiles it ahead of time and compares
 * the compiled program's results with `galleyc run`:
 *
 *   aot_randprog SEED DIR    writes DIR/prog.tin and DIR/IN.tns per input,
 *                            and prints one line per input (declaration
 *                            order): NAME FILE FORMAT (FORMAT "scalar" for
 *                            order 0), then "finite" or "nonfinite"
 *
 * The format is the random one the generator built the tensor in, so the
 * compiled programs meet every level kind and mode order.
 */
#include "randprog.h"

static int write_case(uint64_t seed, const char *dir);

static uint64_t case_seed;
static const char *case_dir;
static int case_rc;

/* The generator's checks are Check assertions: run it as a Check test
 * (in this process, so that its output is this program's). */
START_TEST(generate) { case_rc = write_case(case_seed, case_dir); }
END_TEST

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: aot_randprog SEED DIR\n");
    return 2;
  }
  (void)same_value;
  case_seed = strtoull(argv[1], NULL, 10);
  case_dir = argv[2];
  case_rc = 1;
  Suite *s = suite_create("aot_randprog");
  TCase *tc = tcase_create("generate");
  tcase_add_test(tc, generate);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_set_log(sr, NULL);
  srunner_run_all(sr, CK_SILENT);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : case_rc;
}

static int write_case(uint64_t seed, const char *dir) {
  test_rng mix = test_rng_seed(seed);
  test_rng r = test_rng_seed(test_rng_next(&mix));
  Gen g;
  memset(&g, 0, sizeof g);
  g.r = &r;
  g.inf_values = chance(&g, 0.1);
  g.defer_fills = 1;
  char *text = gen_program(&g);
  char path[4096];
  snprintf(path, sizeof path, "%s/prog.tin", dir);
  FILE *f = fopen(path, "w");
  if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
    fprintf(stderr, "aot_randprog: cannot write %s\n", path);
    return 1;
  }
  free(text);
  int nonfinite = 0;
  for (int k = 0; k < g.ninputs; k++) {
    galley_tensor *t = gen_tensor(&g, &g.in[k], gen_density(&g));
    galley_error err;
    galley_format fmt;
    char ftext[256];
    galley_facts facts;
    snprintf(path, sizeof path, "%s/%s.tns", dir, g.in[k].name);
    if (galley_tensor_write(t, path, GALLEY_FILE_AUTO, &err) != GALLEY_OK ||
        galley_tensor_facts(t, &facts, &err) != GALLEY_OK) {
      fprintf(stderr, "aot_randprog: %s\n", err.msg);
      return 1;
    }
    nonfinite |= facts.nan + facts.pos_inf + facts.neg_inf > 0;
    galley_tensor_format(t, &fmt);
    galley_format_print(&fmt, ftext, sizeof ftext);
    printf("%s %s %s\n", g.in[k].name, path, ftext[0] ? ftext : "scalar");
    galley_tensor_free(t);
  }
  printf("%s\n", nonfinite ? "nonfinite" : "finite");
  return 0;
}
