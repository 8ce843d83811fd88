package bqwrite

import (
	"encoding/base64"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// A row the streaming write's service refused, whose element cannot be
// rebuilt (write_stream.go's failedRow), is shown as protojson shows the
// encoded row as a dynamic message of its writer schema (write_descriptor.go):
// the fields' JSON names, INT64 as strings, BYTES in base64, unset fields
// left out; it was written by hand before, to keep protodesc and dynamicpb
// out of programs, and showed rows as protojson does (TestProtoJSONWire's
// cases are its). protojson's single-line output puts a space after some
// commas or not, as the binary's hash says (it calls its output unstable),
// which a reader of JSON does not see. Two columns whose fields have one
// JSON name (a_b and aB) are shown under it twice, by protojson as by the
// hand-written code (TestProtoJSONSharedJSONName); UseProtoNames would
// show them apart, but under other keys than before.

// protoJSON is an encoded row as JSON, as protojson shows it as a message
// of the writer schema desc, or the row's bytes in base64 if it cannot be
// decoded: malformed, a REQUIRED field missing, or a string not UTF-8.
func protoJSON(desc *descriptorpb.DescriptorProto, row []byte) string {
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{Name: proto.String("row.proto"), Syntax: proto.String("proto2"),
		MessageType: []*descriptorpb.DescriptorProto{desc}}, nil)
	if err == nil && fd.Messages().Len() == 1 {
		m := dynamicpb.NewMessage(fd.Messages().Get(0))
		if proto.Unmarshal(row, m) == nil {
			if b, err := protojson.Marshal(m); err == nil {
				return string(b)
			}
		}
	}
	return base64.StdEncoding.EncodeToString(row)
}
