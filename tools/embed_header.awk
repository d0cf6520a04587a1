# embed_header.awk -- turn a C header into the body of a C string literal
# (one "...\n" line per source line), so the code generator can put the
# kernel header's text into every kernel it emits: JIT and AOT sources are
# then self-contained and need no include path.
{
  gsub(/\\/, "\\\\")
  gsub(/"/, "\\\"")
  printf "\"%s\\n\"\n", $0
}
