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
  return role == PLAIT_AUTH_SERVER ? "plait-v1 rank0 proof" : "plait-v1 peer proof";
}

plait_result_t plait_auth_nonce(uint8_t *nonce) {
  if (RAND_bytes(nonce, PLAIT_WIRE_NONCE_SIZE) != 1)
    return plait_error(PLAIT_ERR_SYSTEM, "RAND_bytes failed: %s",
                       ERR_error_string(ERR_get_error(), NULL));
  return PLAIT_SUCCESS;
}

plait_result_t plait_auth_mac(const char *secret, plait_auth_role_t role,
                              const uint8_t *server_nonce, const uint8_t *client_nonce,
                              uint32_t rank, uint32_t size, uint8_t *mac) {
  uint8_t msg[64 + 2 * PLAIT_WIRE_NONCE_SIZE + 8];
  size_t n = 0;
  const char *label = role_label(role);
  size_t label_len = strlen(label);
  memcpy(msg, label, label_len);
  n += label_len;
  const uint8_t *first = role == PLAIT_AUTH_SERVER ? client_nonce : server_nonce;
  const uint8_t *second = role == PLAIT_AUTH_SERVER ? server_nonce : client_nonce;
  memcpy(msg + n, first, PLAIT_WIRE_NONCE_SIZE);
  n += PLAIT_WIRE_NONCE_SIZE;
  memcpy(msg + n, second, PLAIT_WIRE_NONCE_SIZE);
  n += PLAIT_WIRE_NONCE_SIZE;
  plait_store_le32(msg + n, rank);
  plait_store_le32(msg + n + 4, size);
  n += 8;
  unsigned int out_len = 0;
  if (!HMAC(EVP_sha256(), secret, (int)strlen(secret), msg, n, mac, &out_len) ||
      out_len != PLAIT_WIRE_MAC_SIZE)
    return plait_error(PLAIT_ERR_SYSTEM, "HMAC-SHA256 failed: %s",
                       ERR_error_string(ERR_get_error(), NULL));
  return PLAIT_SUCCESS;
}

int plait_auth_verify(const char *secret, plait_auth_role_t role,
                      const uint8_t *server_nonce, const uint8_t *client_nonce,
                      uint32_t rank, uint32_t size, const uint8_t *mac) {
  uint8_t expect[PLAIT_WIRE_MAC_SIZE];
  if (plait_auth_mac(secret, role, server_nonce, client_nonce, rank, size, expect))
    return 0;
  return CRYPTO_memcmp(expect, mac, PLAIT_WIRE_MAC_SIZE) == 0;
}
