/* The signing floor of scripts/bench-signing: libsecp256k1's own recoverable ECDSA signatures per
 * second (RFC 6979 nonces, the library's default), one thread, over a fresh 32-byte digest each
 * time. Prints one JSON line: {"signatures":N,"seconds":S,"perSecond":R}. Asserts nothing. */
#include <secp256k1.h>
#include <secp256k1_recovery.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 3.0;
  secp256k1_context *ctx = secp256k1_context_create(SECP256K1_CONTEXT_NONE);
  unsigned char key[32], digest[32], out[64];
  memset(key, 0x46, sizeof key);
  memset(digest, 0, sizeof digest);
  secp256k1_ecdsa_recoverable_signature sig;
  int recid;
  long count = 0;
  double start = now(), end = start + seconds, t = start;
  while (t < end) {
    for (int i = 0; i < 64; i++) {
      memcpy(digest, &count, sizeof count);
      if (!secp256k1_ecdsa_sign_recoverable(ctx, &sig, digest, key, NULL, NULL)) return 1;
      secp256k1_ecdsa_recoverable_signature_serialize_compact(ctx, out, &recid, &sig);
      count++;
    }
    t = now();
  }
  printf("{\"signatures\":%ld,\"seconds\":%.3f,\"perSecond\":%.1f}\n", count, t - start, count / (t - start));
  secp256k1_context_destroy(ctx);
  return 0;
}
