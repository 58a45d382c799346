/* Broken: needs a symbol no library provides, so dlopen fails. */
extern int plait_symbol_that_does_not_exist(void);
__attribute__((visibility("default"))) int use_it(void) { return plait_symbol_that_does_not_exist(); }
