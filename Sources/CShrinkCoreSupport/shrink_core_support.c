#include "shrink_core_support.h"
