# embed_source.awk -- turn a C source file into the body of a C string
# literal (one "...\n" line per source line), leaving out its include of
# galley_rt.h: src/aot/aot.c embeds runtime/aot_runtime.c after the
# kernel source, which already holds that header's text.  An include of
# galley_rt_ws.h, galley_rt_blocks.h, galley_rt_sliced.h or
# galley_rt_sink.h (the code the runtime shares with the library's
# executor) is replaced by that file's text (read from the
# directory `dir`, set with -v), so the generated program needs no header
# of ours.
function emit(line) {
  gsub(/\\/, "&&", line)
  gsub(/"/, "\\\"", line)
  printf "\"%s\\n\"\n", line
}
/^#include "galley_rt.h"/ { next }
/^#include "galley_rt_(ws|blocks|sliced|sink)\.h"/ {
  path = $2
  gsub(/"/, "", path)
  path = dir "/" path
  while ((getline line < path) > 0)
    if (line !~ /^#include "galley_rt.h"/)
      emit(line)
  close(path)
  next
}
{ emit($0) }
