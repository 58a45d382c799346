/* Broken: exports no plait_transport_v1 symbol. */
__attribute__((visibility("default"))) int plait_transport_v0_typo = 1;
