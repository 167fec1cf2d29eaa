#inc\
lude "h1.h"
x\
y /* a
 */ # define M1 1
R"q(" /* )q";
# define M2 2
// */
z
