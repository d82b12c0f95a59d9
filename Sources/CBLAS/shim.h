// The CBLAS interface of Debian's libblas-dev (netlib reference BLAS by default; OpenBLAS or BLIS
// when installed, through Debian's alternatives for libblas.so.3).
#include <cblas.h>
