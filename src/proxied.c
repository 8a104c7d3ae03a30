/* placeholder: being written */
#include "postgres.h"
