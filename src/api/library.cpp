// libvigil.so is the C API of vigil_core, linked whole; this file only gives
// the shared library a translation unit of its own.
#include "vigil/vigil.h"
