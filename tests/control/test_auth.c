/*
 * Tests of the HMAC-SHA256 challenge-response (src/control/auth.c): a right MAC
 * verifies, and changing any one input (secret, role, rank, size, either
 * nonce, one bit of the MAC) makes it fail.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "control/auth.h"
#include "plait/plait.h"
#include "control/wire.h"

#define NONCE PLAIT_WIRE_NONCE_SIZE
#define MACN PLAIT_WIRE_MAC_SIZE

static const char kSecret[] = "0123456789abcdef0123456789abcdef";

typedef struct {
  uint8_t server[NONCE], client[NONCE];
} nonces_t;

static nonces_t fresh_nonces(void) {
  nonces_t n;
  cr_assert_eq(plait_auth_nonce(n.server), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(plait_auth_nonce(n.client), PLAIT_SUCCESS, "%s", plait_last_error());
  return n;
}

static void mac_of(const char *secret, plait_auth_role_t role, const nonces_t *n, uint32_t rank,
                   uint32_t size, uint8_t *mac) {
  memset(mac, 0, MACN);
  plait_result_t rc = plait_auth_mac(secret, role, n->server, n->client, rank, size, mac);
  cr_assert_eq(rc, PLAIT_SUCCESS, "plait_auth_mac: %s", plait_last_error());
}

static int is_zero(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

Test(auth, right_mac_verifies_for_both_roles) {
  nonces_t n = fresh_nonces();
  for (int role = PLAIT_AUTH_CLIENT; role <= PLAIT_AUTH_SERVER; role++) {
    uint8_t mac[MACN];
    mac_of(kSecret, (plait_auth_role_t)role, &n, 3, 8, mac);
    cr_expect(!is_zero(mac, MACN), "role %d: MAC is all zero", role);
    cr_expect_eq(plait_auth_verify(kSecret, (plait_auth_role_t)role, n.server, n.client, 3, 8, mac),
                 1, "role %d: the right MAC does not verify", role);
  }
}

Test(auth, mac_is_deterministic) {
  nonces_t n = fresh_nonces();
  uint8_t a[MACN], b[MACN];
  mac_of(kSecret, PLAIT_AUTH_CLIENT, &n, 1, 2, a);
  mac_of(kSecret, PLAIT_AUTH_CLIENT, &n, 1, 2, b);
  cr_expect_eq(memcmp(a, b, MACN), 0);
}

Test(auth, wrong_secret_fails) {
  nonces_t n = fresh_nonces();
  uint8_t mac[MACN];
  mac_of(kSecret, PLAIT_AUTH_CLIENT, &n, 1, 4, mac);
  static const char *others[] = {"0123456789abcdef0123456789abcdeF", /* one letter */
                                 "0123456789abcdef0123456789abcde",  /* one shorter */
                                 "0123456789abcdef0123456789abcdef0", /* one longer */
                                 ""};
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
    cr_expect_eq(plait_auth_verify(others[i], PLAIT_AUTH_CLIENT, n.server, n.client, 1, 4, mac), 0,
                 "MAC verifies under secret \"%s\"", others[i]);
}

Test(auth, swapped_role_fails) {
  nonces_t n = fresh_nonces();
  uint8_t client[MACN], server[MACN];
  mac_of(kSecret, PLAIT_AUTH_CLIENT, &n, 2, 4, client);
  mac_of(kSecret, PLAIT_AUTH_SERVER, &n, 2, 4, server);
  cr_expect_neq(memcmp(client, server, MACN), 0, "client and server MACs are equal");
  cr_expect_eq(plait_auth_verify(kSecret, PLAIT_AUTH_SERVER, n.server, n.client, 2, 4, client), 0,
               "a client MAC passes as the server's");
  cr_expect_eq(plait_auth_verify(kSecret, PLAIT_AUTH_CLIENT, n.server, n.client, 2, 4, server), 0,
               "a server MAC passes as the client's");
}

Test(auth, reflected_nonces_fail) {
  /* A server that echoes the client's nonces back must not obtain a MAC that
   * passes as its own: the roles order the nonces differently and label them. */
  nonces_t n = fresh_nonces();
  nonces_t swapped;
  memcpy(swapped.server, n.client, NONCE);
  memcpy(swapped.client, n.server, NONCE);
  uint8_t mac[MACN];
  mac_of(kSecret, PLAIT_AUTH_CLIENT, &swapped, 2, 4, mac);
  cr_expect_eq(plait_auth_verify(kSecret, PLAIT_AUTH_SERVER, n.server, n.client, 2, 4, mac), 0);
  cr_expect_eq(plait_auth_verify(kSecret, PLAIT_AUTH_CLIENT, n.server, n.client, 2, 4, mac), 0);
}

Test(auth, other_rank_or_size_fails) {
  nonces_t n = fresh_nonces();
  uint8_t mac[MACN];
  mac_of(kSecret, PLAIT_AUTH_CLIENT, &n, 5, 16, mac);
  static const uint32_t ranks[] = {0, 4, 6, 16, 5u + (1u << 8), 5u + (1u << 24)};
  for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++)
    cr_expect_eq(plait_auth_verify(kSecret, PLAIT_AUTH_CLIENT, n.server, n.client, ranks[i], 16, mac),
                 0, "MAC for rank 5 verifies as rank %u", ranks[i]);
  static const uint32_t sizes[] = {15, 17, 1, 16u + (1u << 16)};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    cr_expect_eq(plait_auth_verify(kSecret, PLAIT_AUTH_CLIENT, n.server, n.client, 5, sizes[i], mac),
                 0, "MAC for size 16 verifies for size %u", sizes[i]);
  /* rank and size swapped */
  uint8_t mac2[MACN];
  mac_of(kSecret, PLAIT_AUTH_CLIENT, &n, 16, 5, mac2);
  cr_expect_neq(memcmp(mac, mac2, MACN), 0);
}

Test(auth, flipped_nonce_bit_fails) {
  nonces_t n = fresh_nonces();
  uint8_t mac[MACN];
  mac_of(kSecret, PLAIT_AUTH_SERVER, &n, 1, 2, mac);
  static const size_t bytes[] = {0, 1, NONCE / 2, NONCE - 1};
  for (size_t i = 0; i < sizeof bytes / sizeof bytes[0]; i++) {
    for (int bit = 0; bit < 8; bit += 7) {
      nonces_t m = n;
      m.server[bytes[i]] ^= (uint8_t)(1u << bit);
      cr_expect_eq(plait_auth_verify(kSecret, PLAIT_AUTH_SERVER, m.server, m.client, 1, 2, mac), 0,
                   "server nonce byte %zu bit %d flipped, still verifies", bytes[i], bit);
      m = n;
      m.client[bytes[i]] ^= (uint8_t)(1u << bit);
      cr_expect_eq(plait_auth_verify(kSecret, PLAIT_AUTH_SERVER, m.server, m.client, 1, 2, mac), 0,
                   "client nonce byte %zu bit %d flipped, still verifies", bytes[i], bit);
    }
  }
}

Test(auth, flipped_mac_bit_fails) {
  nonces_t n = fresh_nonces();
  uint8_t mac[MACN];
  mac_of(kSecret, PLAIT_AUTH_CLIENT, &n, 0, 3, mac);
  for (size_t byte = 0; byte < MACN; byte++) {
    for (int bit = 0; bit < 8; bit++) {
      uint8_t bad[MACN];
      memcpy(bad, mac, MACN);
      bad[byte] ^= (uint8_t)(1u << bit);
      cr_assert_eq(plait_auth_verify(kSecret, PLAIT_AUTH_CLIENT, n.server, n.client, 0, 3, bad), 0,
                   "MAC byte %zu bit %d flipped, still verifies", byte, bit);
    }
  }
  uint8_t zero[MACN] = {0};
  cr_expect_eq(plait_auth_verify(kSecret, PLAIT_AUTH_CLIENT, n.server, n.client, 0, 3, zero), 0);
}

Test(auth, nonces_differ) {
  uint8_t a[NONCE], b[NONCE];
  cr_assert_eq(plait_auth_nonce(a), PLAIT_SUCCESS);
  cr_assert_eq(plait_auth_nonce(b), PLAIT_SUCCESS);
  cr_expect_neq(memcmp(a, b, NONCE), 0, "two nonces are equal");
  cr_expect(!is_zero(a, NONCE), "nonce is all zero");
  /* many in a row: no repeat (a counter or a badly seeded generator that
   * cycles quickly would show here) */
  static uint8_t many[64][NONCE];
  for (size_t i = 0; i < 64; i++) {
    cr_assert_eq(plait_auth_nonce(many[i]), PLAIT_SUCCESS);
    for (size_t j = 0; j < i; j++)
      cr_assert_neq(memcmp(many[i], many[j], NONCE), 0, "nonce %zu repeats nonce %zu", i, j);
  }
}

Test(auth, known_answer) {
  /* Pin the construction: HMAC-SHA256(secret, label | first | second |
   * le32 rank | le32 size), the client MACing (server, client) nonces under
   * "plait-v1 peer proof". Computed independently with Python's hmac module:
   *   hmac.new(b"k", b"plait-v1 peer proof" + b"\x01"*32 + b"\x02"*32 +
   *            (3).to_bytes(4,"little") + (8).to_bytes(4,"little"),
   *            hashlib.sha256).hexdigest()
   * An accidental change of the wire construction breaks mixed-version jobs
   * silently; this test makes it loud. */
  nonces_t n;
  memset(n.server, 1, NONCE);
  memset(n.client, 2, NONCE);
  uint8_t mac[MACN];
  mac_of("k", PLAIT_AUTH_CLIENT, &n, 3, 8, mac);
  char hex[2 * MACN + 1];
  for (size_t i = 0; i < MACN; i++) snprintf(hex + 2 * i, 3, "%02x", mac[i]);
  cr_expect_str_eq(hex, "c16755fd92cd9cb6f85138ce1e92f6805ae54ec5fbf27fe7b1982a2757c9df40");

  /* the server MACs (client, server) nonces under "plait-v1 rank0 proof" */
  mac_of("k", PLAIT_AUTH_SERVER, &n, 3, 8, mac);
  for (size_t i = 0; i < MACN; i++) snprintf(hex + 2 * i, 3, "%02x", mac[i]);
  cr_expect_str_eq(hex, "79f8bd9b57148e97398c0fca3b8df5f41f691d73251d0beac96e597e0da5202c");
}
