package scheduler

import (
	"encoding/base64"
	"errors"
	"strings"
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

// The job id and attempt of a task token have one spelling too: decimal,
// no sign, no leading zero.
func TestTaskTokenNumbersHaveOneSpelling(t *testing.T) {
	tok := taskToken(jobq.Fence{ID: 4, Attempt: 1}, []byte("0123456789abcdef"))
	secret := tok[strings.LastIndexByte(tok, '.')+1:]
	if _, err := parseTaskToken("jqt1.4.1." + secret); err != nil {
		t.Fatalf("the real token: %v", err)
	}
	for _, head := range []string{"04.1", "4.01", "+4.1", "4.+1", "-4.1", "4.-1", "00.1", "4.00", " 4.1", "4. 1"} {
		forged := "jqt1." + head + "." + secret
		if _, err := parseTaskToken(forged); !errors.Is(err, ErrTokenMalformed) {
			t.Errorf("parseTaskToken(%q) = %v, want ErrTokenMalformed", forged, err)
		}
	}
}
