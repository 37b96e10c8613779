# Writes OUT, a header defining IOUSCOPE_COMMIT: the commit the tree was built from, for
# `iouscoped --version`. Run at every build (a rebuild after a commit must not keep the old one)
# and rewritten only when the commit changes, so nothing recompiles otherwise. Outside a git
# checkout (a source package) it is COMMIT if the build was given one, else "unknown".
set(commit "${COMMIT}")
if(NOT commit)
  execute_process(COMMAND git -C "${SRC}" rev-parse --short=12 HEAD
    OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(rc EQUAL 0)
    execute_process(COMMAND git -C "${SRC}" status --porcelain --untracked-files=no
      OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(dirty)
      string(APPEND commit "-dirty")
    endif()
  else()
    set(commit "unknown")
  endif()
endif()
set(text "#define IOUSCOPE_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
