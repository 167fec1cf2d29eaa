/*
 * spinfoam.h — compatibility alias: programs written for spinfoam's SDK ABI 1 include this
 * name and get wakeful.h unchanged (sdk.md §1).
 */
#ifndef SPINFOAM_H
#define SPINFOAM_H
#include "wakeful.h"
#endif /* SPINFOAM_H */
