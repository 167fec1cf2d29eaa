a u8'b' L'c' 1e+x 0x1p-3 %:define M3 3
%: define M4 4
#define M0 0
%:include <h2.h>
"unterminated
w ' q
