#!/usr/bin/env bash
# test_bindings_layout: the table the language bindings are checked against (bindings/layout/ember.layout)
# is what ember_layout.c prints for this build's header, and ember_layout.c lists everything the header
# declares: every EMBER_API function and every field of every struct. (The C compiler has already
# checked each listed entry's type against the header when it built ember-layout.)
# Usage: bindings_layout.sh EMBER_LAYOUT_EXE SOURCE_DIR
set -euo pipefail
exe=$1
src=$2
header=$src/include/ember/ember.h
table=$src/bindings/layout/ember.layout
fail=0

actual=$("$exe") || { echo "FAIL: ember-layout found a struct whose fields do not tile it (above)"; exit 1; }
if ! diff -u "$table" <(printf '%s\n' "$actual"); then
  echo "FAIL: bindings/layout/ember.layout is stale: regenerate it with"
  echo "      $exe > bindings/layout/ember.layout   (and update the bindings to match)"
  fail=1
fi

# The header without comments, one string.
plain=$(perl -0777 -pe 's{/\*.*?\*/}{}gs' "$header")

want_fns=$(printf '%s\n' "$plain" | perl -0777 -ne 'print "$1\n" while /EMBER_API\s[^;(]*?\b(ember_\w+)\s*\(/g' | sort)
have_fns=$(printf '%s\n' "$actual" | awk '$1 == "fn" { print $2 }' | sort)
if [ "$want_fns" != "$have_fns" ]; then
  echo "FAIL: the functions of ember.h and of ember_layout.c differ (< header only, > layout only):"
  diff <(printf '%s\n' "$want_fns") <(printf '%s\n' "$have_fns") | grep '^[<>]' || true
  fail=1
fi

# Fields: inside each `typedef struct NAME { ... } NAME;`, the identifier before each ';'.
want_fields=$(printf '%s\n' "$plain" | perl -0777 -ne '
  while (/typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*\w+\s*;/gs) {
    my ($s, $body) = ($1, $2);
    for my $decl (split /;/, $body) {
      next unless $decl =~ /(\w+)\s*(\[[^\]]*\])?\s*$/;
      print "$s $1\n";
    }
  }' | sort)
have_fields=$(printf '%s\n' "$actual" | awk '$1 == "field" { print $2, $3 }' | sort)
if [ "$want_fields" != "$have_fields" ]; then
  echo "FAIL: the struct fields of ember.h and of ember_layout.c differ (< header only, > layout only):"
  diff <(printf '%s\n' "$want_fields") <(printf '%s\n' "$have_fields") | grep '^[<>]' || true
  fail=1
fi

# Enum constants: every NAME = VALUE inside a typedef enum.
want_enums=$(printf '%s\n' "$plain" | perl -0777 -ne '
  while (/typedef\s+enum\s+(\w+)\s*\{(.*?)\}/gs) { my $b = $2; print "$1\n" while $b =~ /(EMBER_\w+)\s*=/g }' | sort)
have_enums=$(printf '%s\n' "$actual" | awk '$1 == "enum" { print $3 }' | sort)
if [ "$want_enums" != "$have_enums" ]; then
  echo "FAIL: the enum values of ember.h and of ember_layout.c differ (< header only, > layout only):"
  diff <(printf '%s\n' "$want_enums") <(printf '%s\n' "$have_enums") | grep '^[<>]' || true
  fail=1
fi

[ $fail -eq 0 ] && echo "ok: $(printf '%s\n' "$have_fns" | wc -l) functions, $(printf '%s\n' "$have_fields" | wc -l) fields, $(printf '%s\n' "$have_enums" | wc -l) enum values"
exit $fail
