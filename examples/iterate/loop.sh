# loop.sh -- what the shell loops of examples/iterate share (sourced).

# size_of GRAPH.mtx[.gz]: the number of rows of a Matrix Market file
size_of() {
  case $1 in
    *.gz) gzip -dc "$1" ;;
    *) cat "$1" ;;
  esac | awk '!/^%/ { print $1; exit }'
}

# scalar_of FILE.tns: the value of a scalar result (a file without an
# entry line holds its fill)
scalar_of() {
  awk '/^# fill:/ { fill = $3 } !/^#/ { v = $1; set = 1 }
       END { print (set ? v : fill) }' "$1"
}
