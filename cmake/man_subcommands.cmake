# The sections of iouscope(1) that help2man cannot find itself: each subcommand's own --help,
# as a help2man include file (cmake/install.cmake). cmake -DCLI=... -DOUT=... -P this file.
set(_h2m "")
foreach(_sub top advise)
  execute_process(COMMAND ${CLI} ${_sub} --help OUTPUT_VARIABLE _help RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${CLI} ${_sub} --help exited ${_rc}")
  endif()
  # Verbatim in roff: backslashes escaped, a line's leading dot or quote made plain text.
  string(REPLACE "\\" "\\e" _help "${_help}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" _help "${_help}")
  string(TOUPPER "${_sub}" _up)
  string(APPEND _h2m "[IOUSCOPE ${_up}]\n.nf\n${_help}.fi\n\n")
endforeach()
file(WRITE ${OUT} "${_h2m}")
