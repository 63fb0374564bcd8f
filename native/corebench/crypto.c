/* Crypto: AES-256-XTS encryption of 1 MiB sectors of 4 KiB through OpenSSL's EVP interface. */
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "workload.h"

#define BUF (1 << 20)
#define SECTOR 4096

struct aes {
    EVP_CIPHER_CTX *ctx;
    unsigned char key[64], *in, *out;
    unsigned long sector;
};

static void *aes_setup(void)
{
    struct aes *a = calloc(1, sizeof *a);
    a->in = malloc(BUF);
    a->out = malloc(BUF);
    a->ctx = EVP_CIPHER_CTX_new();
    for (int i = 0; i < 64; i++) /* XTS needs two different key halves */
        a->key[i] = (unsigned char)(i * 7 + 1);
    for (int i = 0; i < BUF; i++)
        a->in[i] = (unsigned char)(i * 31 + (i >> 8));
    return a;
}

static double aes_run(void *p)
{
    struct aes *a = p;
    for (int off = 0; off < BUF; off += SECTOR) {
        unsigned char iv[16] = { 0 };
        memcpy(iv, &a->sector, sizeof a->sector);
        a->sector++;
        int len = 0;
        EVP_EncryptInit_ex(a->ctx, EVP_aes_256_xts(), NULL, a->key, iv);
        EVP_EncryptUpdate(a->ctx, a->out + off, &len, a->in + off, SECTOR);
    }
    return BUF / 1e6;
}

/* Decrypting one sector gives the plaintext back. */
static int aes_check(void *p)
{
    struct aes *a = p;
    unsigned char iv[16] = { 0 }, back[SECTOR];
    unsigned long s = a->sector - BUF / SECTOR;
    memcpy(iv, &s, sizeof s);
    int len = 0;
    EVP_DecryptInit_ex(a->ctx, EVP_aes_256_xts(), NULL, a->key, iv);
    EVP_DecryptUpdate(a->ctx, back, &len, a->out, SECTOR);
    return len == SECTOR && memcmp(back, a->in, SECTOR) == 0;
}

static void aes_teardown(void *p)
{
    struct aes *a = p;
    EVP_CIPHER_CTX_free(a->ctx);
    free(a->in), free(a->out), free(a);
}

const struct workload WL_AES_XTS = { "aes-xts", CRYPTO, "MB/s", 2000.0, aes_setup, aes_run, aes_check,
                                     aes_teardown };
