# embed_source.awk -- turn a C source file into the body of a C string
# literal (one "...\n" line per source line), leaving out its include of
# galley_rt.h: src/aot/aot.c embeds runtime/aot_runtime.c after the
# kernel source, which already holds that header's text.
/^#include "galley_rt.h"/ { next }
{
  gsub(/\\/, "&&")
  gsub(/"/, "\\\"")
  printf "\"%s\\n\"\n", $0
}
