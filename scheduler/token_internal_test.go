package scheduler

import (
	"encoding/base64"
	"errors"
	"testing"

	"github.com/jobq/jobq"
)

// A task token's secret has one spelling: 16 bytes are 22 base64url
// characters whose last carries 4 padding bits, which a lenient decoder
// ignores — so a token with only its last character changed would decode
// to the same secret and be accepted as the real one.
func TestTaskTokenSecretHasOneSpelling(t *testing.T) {
	f := jobq.Fence{ID: 17, Attempt: 1}
	nonce := []byte("0123456789abcdef")
	for n := range 64 {
		nonce[0] = byte(n)
		tok := taskToken(f, nonce)
		p, err := parseTaskToken(tok)
		if err != nil {
			t.Fatalf("parseTaskToken(%q): %v", tok, err)
		}
		if !p.verify(nonce) {
			t.Fatalf("the real token %q does not match its nonce", tok)
		}
		last := tok[len(tok)-1]
		for _, c := range []byte(base64URLAlphabet) {
			if c == last {
				continue
			}
			forged := tok[:len(tok)-1] + string(c)
			fp, err := parseTaskToken(forged)
			if err == nil && fp.verify(nonce) {
				t.Fatalf("forged token %q (last character %q for %q) accepted as the real one", forged, c, last)
			}
			if err != nil && !errors.Is(err, ErrTokenMalformed) {
				t.Fatalf("parseTaskToken(%q) = %v, want ErrTokenMalformed or a secret that does not match", forged, err)
			}
		}
	}
	if _, err := base64.RawURLEncoding.Strict().DecodeString("A"); err == nil {
		t.Fatal("strict decoding accepted a one-character secret")
	}
}

const base64URLAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
