package scheduler

import (
	"errors"
	"testing"

	"github.com/jobq/jobq"
)

// TestParseTaskTokenStrictSecret: a secret whose last character carries
// bits the 16 bytes do not use is malformed, not a second spelling of the
// same secret (base64url decoded strictly).
func TestParseTaskTokenStrictSecret(t *testing.T) {
	tok := taskToken(jobq.Fence{ID: 17, Attempt: 2}, []byte("nonce-nonce-nonce"))
	pt, err := parseTaskToken(tok)
	if err != nil || pt.ID != 17 || pt.Attempt != 2 {
		t.Fatalf("parse %q: %+v, %v", tok, pt, err)
	}
	// 16 bytes in 22 characters: the last character holds 2 data bits and
	// 4 padding bits. Setting a padding bit is the forged spelling.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := tok[len(tok)-1]
	i := 0
	for i < len(alphabet) && alphabet[i] != last {
		i++
	}
	forged := tok[:len(tok)-1] + string(alphabet[i^1])
	if _, err := parseTaskToken(forged); !errors.Is(err, ErrTokenMalformed) {
		t.Fatalf("forged last character %q: err %v, want ErrTokenMalformed", forged, err)
	}
}
