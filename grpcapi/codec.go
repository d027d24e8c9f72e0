package grpcapi

import (
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// strictJSONCodec is connect-go's JSON codec except that unknown fields are
// refused (InvalidArgument, the message naming the field) instead of being
// dropped, as the HTTP API refuses them, and that answers use the proto
// field names (job_key, as the HTTP API spells them; requests may use either
// spelling). It is registered under both names
// Connect uses for JSON: "json" and "json; charset=utf-8".
type strictJSONCodec struct{ name string }

var _ connect.Codec = strictJSONCodec{}

// strictJSONCodecs returns the handler options installing strictJSONCodec.
func strictJSONCodecs() []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithCodec(strictJSONCodec{name: "json"}),
		connect.WithCodec(strictJSONCodec{name: "json; charset=utf-8"}),
	}
}

func (c strictJSONCodec) Name() string { return c.name }

func (c strictJSONCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a proto.Message", v)
	}
	return protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
}

func (c strictJSONCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a proto.Message", v)
	}
	if len(data) == 0 {
		return errors.New("body: zero-length payload is not a JSON object")
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(data, m); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	return nil
}
