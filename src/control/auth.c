/* HMAC-SHA256 challenge-response (OpenSSL libcrypto). */
#include "control/auth.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <string.h>

#include "util/error.h"

static const char *role_label(plait_auth_role_t role) {
  switch (role) {
  case PLAIT_AUTH_SERVER: return "plait-v1 rank0 proof";
  case PLAIT_AUTH_ELASTIC_WORKER: return "plait-elastic-client";
  case PLAIT_AUTH_ELASTIC_DRIVER: return "plait-elastic-driver";
  case PLAIT_AUTH_TREE_CHILD: return "plait-tree child proof";
  case PLAIT_AUTH_TREE_PARENT: return "plait-tree parent proof";
  default: return "plait-v1 peer proof";
  }
}

static int server_role(plait_auth_role_t role) {
  return role == PLAIT_AUTH_SERVER || role == PLAIT_AUTH_ELASTIC_DRIVER ||
         role == PLAIT_AUTH_TREE_PARENT;
}

plait_result_t plait_auth_nonce(uint8_t *nonce) {
  if (RAND_bytes(nonce, PLAIT_WIRE_NONCE_SIZE) != 1)
    return plait_error(PLAIT_ERR_SYSTEM, "RAND_bytes failed: %s",
                       ERR_error_string(ERR_get_error(), NULL));
  return PLAIT_SUCCESS;
}

plait_result_t plait_auth_mac_epoch(const char *secret, plait_auth_role_t role,
                                    const uint8_t *server_nonce, const uint8_t *client_nonce,
                                    uint32_t rank, uint32_t size, uint64_t epoch, uint8_t *mac) {
  uint8_t msg[64 + 2 * PLAIT_WIRE_NONCE_SIZE + 16];
  size_t n = 0;
  const char *label = role_label(role);
  size_t label_len = strlen(label);
  memcpy(msg, label, label_len);
  n += label_len;
  const uint8_t *first = server_role(role) ? client_nonce : server_nonce;
  const uint8_t *second = server_role(role) ? server_nonce : client_nonce;
  memcpy(msg + n, first, PLAIT_WIRE_NONCE_SIZE);
  n += PLAIT_WIRE_NONCE_SIZE;
  memcpy(msg + n, second, PLAIT_WIRE_NONCE_SIZE);
  n += PLAIT_WIRE_NONCE_SIZE;
  plait_store_le32(msg + n, rank);
  plait_store_le32(msg + n + 4, size);
  n += 8;
  if (epoch) { /* not elastic: the MAC of old, byte for byte */
    plait_store_le32(msg + n, (uint32_t)epoch);
    plait_store_le32(msg + n + 4, (uint32_t)(epoch >> 32));
    n += 8;
  }
  unsigned int out_len = 0;
  if (!HMAC(EVP_sha256(), secret, (int)strlen(secret), msg, n, mac, &out_len) ||
      out_len != PLAIT_WIRE_MAC_SIZE)
    return plait_error(PLAIT_ERR_SYSTEM, "HMAC-SHA256 failed: %s",
                       ERR_error_string(ERR_get_error(), NULL));
  return PLAIT_SUCCESS;
}

plait_result_t plait_auth_mac(const char *secret, plait_auth_role_t role,
                              const uint8_t *server_nonce, const uint8_t *client_nonce,
                              uint32_t rank, uint32_t size, uint8_t *mac) {
  return plait_auth_mac_epoch(secret, role, server_nonce, client_nonce, rank, size, 0, mac);
}

int plait_auth_verify_epoch(const char *secret, plait_auth_role_t role,
                            const uint8_t *server_nonce, const uint8_t *client_nonce,
                            uint32_t rank, uint32_t size, uint64_t epoch, const uint8_t *mac) {
  uint8_t expect[PLAIT_WIRE_MAC_SIZE];
  if (plait_auth_mac_epoch(secret, role, server_nonce, client_nonce, rank, size, epoch, expect))
    return 0;
  return CRYPTO_memcmp(expect, mac, PLAIT_WIRE_MAC_SIZE) == 0;
}

int plait_auth_verify(const char *secret, plait_auth_role_t role,
                      const uint8_t *server_nonce, const uint8_t *client_nonce,
                      uint32_t rank, uint32_t size, const uint8_t *mac) {
  return plait_auth_verify_epoch(secret, role, server_nonce, client_nonce, rank, size, 0, mac);
}
