package openapi

import (
	"fmt"
	"sync"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	openapiv3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/proto"
)

// protoDoc is the protobuf form of a JSON document, made on first request: it costs
// a lot to build, and only clients that prefer protobuf ask for it.
type protoDoc struct {
	source storedDoc
	toPB   func(json []byte) ([]byte, error)

	mu    sync.Mutex
	doc   storedDoc
	built bool
}

// get returns the protobuf form, building it once. It keeps the JSON form's ETag, as
// upstream does: responses vary by Accept.
func (p *protoDoc) get() (storedDoc, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.built {
		return p.doc, nil
	}
	data, err := p.source.bytes()
	if err != nil {
		return storedDoc{}, err
	}
	pb, err := p.toPB(data)
	if err != nil {
		return storedDoc{}, err
	}
	if p.doc, err = newStoredDoc(pb, p.source.etag, p.source.lastModified); err != nil {
		return storedDoc{}, err
	}
	p.built = true
	return p.doc, nil
}

// sizes returns the compressed and uncompressed lengths held, zero until built.
func (p *protoDoc) sizes() (held, served int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.doc.gz), p.doc.size
}

// toProtoV2 converts a v2 JSON document to gnostic's protobuf form, which client-go's
// discovery client asks for.
func toProtoV2(jsonDoc []byte) ([]byte, error) {
	doc, err := openapiv2.ParseDocument(jsonDoc)
	if err != nil {
		return nil, fmt.Errorf("openapi: v2 document does not parse as OpenAPI v2: %w", err)
	}
	return proto.Marshal(doc)
}

// toProtoV3 converts a v3 JSON document to gnostic's protobuf form.
func toProtoV3(jsonDoc []byte) ([]byte, error) {
	doc, err := openapiv3.ParseDocument(jsonDoc)
	if err != nil {
		return nil, fmt.Errorf("openapi: v3 document does not parse as OpenAPI v3: %w", err)
	}
	return proto.Marshal(doc)
}
