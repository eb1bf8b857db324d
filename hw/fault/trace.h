#include "trace/trace-hw_fault.h"
