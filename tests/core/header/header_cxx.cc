// The public headers compile on their own as C++11 and C++17 (see CMakeLists.txt).
#include <plait/dtypes.h>
#include <plait/parse_size.h>
#include <plait/plait.h>
#include <plait/transport.h>
