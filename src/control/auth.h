/*
 * Internal: proof of job membership by HMAC-SHA256 challenge-response over
 * the job secret (OpenSSL libcrypto). The secret never travels: each side
 * sends a fresh nonce and a MAC over both nonces, a role label, the rank, the
 * job size and, in an elastic job, the epoch. Each role has a label of its own
 * (control plane: peer, rank 0; elastic rendezvous: worker, driver;
 * control tree: child, parent), so a MAC
 * made for one role cannot be replayed in another.
 */
#ifndef PLAIT_AUTH_H
#define PLAIT_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "plait/plait.h"
#include "control/wire.h"

typedef enum {
  PLAIT_AUTH_CLIENT = 0,         /* control plane: a rank > 0 */
  PLAIT_AUTH_SERVER = 1,         /* control plane: rank 0 */
  PLAIT_AUTH_ELASTIC_WORKER = 2, /* elastic rendezvous: a worker (control/elastic_wire.h) */
  PLAIT_AUTH_ELASTIC_DRIVER = 3, /* elastic rendezvous: plaitrun's driver */
  PLAIT_AUTH_TREE_CHILD = 4,     /* control tree (tree.h): a child */
  PLAIT_AUTH_TREE_PARENT = 5     /* control tree: its parent */
} plait_auth_role_t;

/* Fills nonce with PLAIT_WIRE_NONCE_SIZE cryptographically random bytes. */
plait_result_t plait_auth_nonce(uint8_t *nonce);

/* mac = HMAC-SHA256(secret, label(role) | first | second | rank | size
 * [| epoch, when not 0]), where a client role (CLIENT, ELASTIC_WORKER) MACs
 * (server nonce, client nonce) and a server role (SERVER, ELASTIC_DRIVER)
 * MACs (client nonce, server nonce). Epoch 0 (not elastic) gives the MAC
 * plait made before epochs existed, byte for byte. */
plait_result_t plait_auth_mac_epoch(const char *secret, plait_auth_role_t role,
                                    const uint8_t *server_nonce, const uint8_t *client_nonce,
                                    uint32_t rank, uint32_t size, uint64_t epoch, uint8_t *mac);
/* The same with epoch 0. */
plait_result_t plait_auth_mac(const char *secret, plait_auth_role_t role,
                              const uint8_t *server_nonce, const uint8_t *client_nonce,
                              uint32_t rank, uint32_t size, uint8_t *mac);

/* 1 when the MAC is right (constant-time comparison), else 0. */
int plait_auth_verify_epoch(const char *secret, plait_auth_role_t role,
                            const uint8_t *server_nonce, const uint8_t *client_nonce,
                            uint32_t rank, uint32_t size, uint64_t epoch, const uint8_t *mac);
/* The same with epoch 0. */
int plait_auth_verify(const char *secret, plait_auth_role_t role,
                      const uint8_t *server_nonce, const uint8_t *client_nonce,
                      uint32_t rank, uint32_t size, const uint8_t *mac);

#endif
