/* Broken: exports neither plait_transport_v2 nor plait_transport_v1. */
__attribute__((visibility("default"))) int plait_transport_v0_typo = 1;
