/*
 * Internal: proof of job membership by HMAC-SHA256 challenge-response over
 * the job secret (OpenSSL libcrypto). The secret never travels: each side
 * sends a fresh nonce and a MAC over both nonces, a role label, the rank and
 * the job size.
 */
#ifndef PLAIT_AUTH_H
#define PLAIT_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "plait/plait.h"
#include "control/wire.h"

typedef enum { PLAIT_AUTH_CLIENT = 0, PLAIT_AUTH_SERVER = 1 } plait_auth_role_t;

/* Fills nonce with PLAIT_WIRE_NONCE_SIZE cryptographically random bytes. */
plait_result_t plait_auth_nonce(uint8_t *nonce);

/* mac = HMAC-SHA256(secret, label(role) | first | second | rank | size), where
 * the client MACs (server nonce, client nonce) and the server MACs (client
 * nonce, server nonce). */
plait_result_t plait_auth_mac(const char *secret, plait_auth_role_t role,
                              const uint8_t *server_nonce, const uint8_t *client_nonce,
                              uint32_t rank, uint32_t size, uint8_t *mac);

/* 1 when the MAC is right (constant-time comparison), else 0. */
int plait_auth_verify(const char *secret, plait_auth_role_t role,
                      const uint8_t *server_nonce, const uint8_t *client_nonce,
                      uint32_t rank, uint32_t size, const uint8_t *mac);

#endif
