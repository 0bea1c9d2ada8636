# Run as `cmake -DHEADER=<file.pb-c.h> -P proto_fixup.cmake` after protoc-c.
# protoc-c names a service's function-pointer member after the method, so
# Registration.Register becomes `register`, a C keyword. Rename it to `register_`.
file(READ ${HEADER} text)
string(REPLACE "(*register)(" "(*register_)(" text "${text}")
string(REPLACE "## register " "## register_ " text "${text}")
file(WRITE ${HEADER} "${text}")
