/*
 * stdbool.h — bool, true and false for wakeful guests (sdk.md §1, extension).
 */
#ifndef WAKEFUL_STDBOOL_H
#define WAKEFUL_STDBOOL_H

#define bool _Bool
#define true 1
#define false 0
#define __bool_true_false_are_defined 1

#endif /* WAKEFUL_STDBOOL_H */
