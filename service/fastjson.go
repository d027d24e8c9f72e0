package service

import (
	"bytes"
	"encoding/json"
)

// Allocation-free pre-checks for the common, well-formed submit. Each one
// answers "certainly acceptable" or "not sure"; on "not sure" the caller
// runs the token walk it shortcuts, which accepts the same inputs and names
// the error of the others. They never reject anything themselves, so the
// API's answers (and its error messages) do not depend on them.

// plainSubmitObject reports whether body is exactly what DecodeSubmit's
// token walk accepts, told without allocating: valid JSON holding one
// object whose keys are submit fields spelled without escapes, each at
// most once, with nothing but whitespace after it. body must be valid UTF-8.
func plainSubmitObject(body []byte) bool {
	if !json.Valid(body) {
		return false
	}
	// body is valid JSON from here on, so its structure needs no checks.
	i := skipSpace(body, 0)
	if body[i] != '{' {
		return false
	}
	var seen uint32
	for i = skipSpace(body, i+1); body[i] != '}'; i = skipSpace(body, i+1) {
		if body[i] == ',' {
			i = skipSpace(body, i+1)
		}
		end := i + 1 + bytes.IndexByte(body[i+1:], '"')
		key := body[i+1 : end]
		if bytes.IndexByte(key, '\\') >= 0 {
			return false // an escaped key: the token walk decodes it
		}
		f := submitFieldIndex(key)
		if f < 0 || seen&(1<<f) != 0 {
			return false
		}
		seen |= 1 << f
		i = skipSpace(body, end+1)                    // the ':'
		i = skipValue(body, skipSpace(body, i+1)) - 1 // the value's last byte
	}
	return skipSpace(body, i+1) == len(body)
}

// submitFieldIndex is key's index in submitFields, or -1.
func submitFieldIndex(key []byte) int {
	for i, f := range submitFields {
		if string(key) == f {
			return i
		}
	}
	return -1
}

// plainParamsShape reports whether compact (compacted valid JSON) nests at
// most MaxParamsDepth deep and repeats no key within one object, told
// without decoding: false when it does not, or when a key is escaped or an
// object has many keys (checkParamsShape's token walk decides those).
func plainParamsShape(compact []byte) bool {
	const maxKeys = 32                   // compared pairwise; more go to the token walk
	type frame struct{ start, keys int } // keys[start:] are this object's keys

	var (
		stackBuf [16]frame
		stack    = stackBuf[:0]
		keysBuf  [64][]byte
		keys     = keysBuf[:0]
	)
	for i := 0; i < len(compact); {
		switch c := compact[i]; c {
		case '{', '[':
			if len(stack) >= MaxParamsDepth {
				return false
			}
			stack = append(stack, frame{start: len(keys)})
			i++
		case '}', ']':
			keys = keys[:stack[len(stack)-1].start]
			stack = stack[:len(stack)-1]
			i++
		case '"':
			end := stringEnd(compact, i)
			// compact: a string followed by ':' is an object's key.
			if end < len(compact) && compact[end] == ':' {
				key := compact[i+1 : end-1]
				top := &stack[len(stack)-1]
				if bytes.IndexByte(key, '\\') >= 0 || top.keys >= maxKeys {
					return false
				}
				for _, k := range keys[top.start:] {
					if bytes.Equal(k, key) {
						return false
					}
				}
				keys = append(keys, key)
				top.keys++
			}
			i = end
		default:
			i++
		}
	}
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just after the JSON string starting at b[i].
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index just after the valid JSON value at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}
