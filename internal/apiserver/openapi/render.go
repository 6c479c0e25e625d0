package openapi

// Rendering of paths and operations into the two document formats. Path items and
// operations become JSON objects (maps, so keys come out sorted like upstream's).

import (
	"crypto/sha256"
	"encoding/hex"
)

// renderV2 renders the path item for the v2 document; its parameters are written
// once into shared and referred to, as upstream does, since the long descriptions of
// the list and delete options would otherwise repeat in every operation.
func (p *pathItem) renderV2(shared sharedParams) map[string]any {
	out := map[string]any{}
	if len(p.params) > 0 {
		out["parameters"] = shared.refs(p.params)
	}
	for _, op := range p.operations {
		params := shared.refs(op.params)
		if op.bodyRef != "" {
			body := map[string]any{"name": "body", "in": "body", "schema": refV2(op.bodyRef)}
			if op.method != "delete" {
				body["required"] = true
			}
			params = append([]map[string]any{body}, params...)
		}
		responses := map[string]any{}
		for _, r := range op.responses {
			resp := map[string]any{"description": r.description}
			if r.refName != "" {
				resp["schema"] = refV2(r.refName)
			}
			responses[r.code] = resp
		}
		o := map[string]any{
			"description": op.description,
			"operationId": op.id,
			"consumes":    op.consumes,
			"produces":    op.produces,
			"schemes":     []string{"https"},
			"tags":        op.tags,
			"responses":   responses,
		}
		if len(params) > 0 {
			o["parameters"] = params
		}
		op.addExtensions(o)
		out[op.method] = o
	}
	return out
}

func (p *pathItem) renderV3() map[string]any {
	out := map[string]any{}
	if len(p.params) > 0 {
		out["parameters"] = paramsV3(p.params)
	}
	for _, op := range p.operations {
		responses := map[string]any{}
		for _, r := range op.responses {
			resp := map[string]any{"description": r.description}
			if r.refName != "" {
				resp["content"] = contentV3(op.produces, r.refName)
			}
			responses[r.code] = resp
		}
		o := map[string]any{
			"description": op.description,
			"operationId": op.id,
			"tags":        op.tags,
			"responses":   responses,
		}
		if len(op.params) > 0 {
			o["parameters"] = paramsV3(op.params)
		}
		if op.bodyRef != "" {
			body := map[string]any{"content": contentV3(op.consumes, op.bodyRef)}
			if op.method != "delete" {
				body["required"] = true
			}
			o["requestBody"] = body
		}
		op.addExtensions(o)
		out[op.method] = o
	}
	return out
}

func (op *operation) addExtensions(o map[string]any) {
	if op.action != "" {
		o["x-kubernetes-action"] = op.action
	}
	if op.gvk != nil {
		o["x-kubernetes-group-version-kind"] = *op.gvk
	}
}

func refV2(name string) map[string]string {
	return map[string]string{"$ref": "#/definitions/" + name}
}

func contentV3(mediaTypes []string, name string) map[string]any {
	content := make(map[string]any, len(mediaTypes))
	for _, mt := range mediaTypes {
		content[mt] = map[string]any{"schema": map[string]string{"$ref": "#/components/schemas/" + name}}
	}
	return content
}

// sharedParams is the v2 document's parameters section, keyed like upstream's: the
// parameter's name and a short hash of its definition ("fieldManager-1a2b3c4d").
type sharedParams map[string]map[string]any

func (s sharedParams) refs(params []parameter) []map[string]any {
	out := make([]map[string]any, 0, len(params))
	for _, p := range params {
		sum := sha256.Sum256([]byte(p.in + "\x00" + p.typ + "\x00" + p.description))
		key := p.name + "-" + hex.EncodeToString(sum[:4])
		if _, ok := s[key]; !ok {
			m := map[string]any{"name": p.name, "in": p.in, "type": p.typ, "uniqueItems": true}
			if p.description != "" {
				m["description"] = p.description
			}
			if p.required {
				m["required"] = true
			}
			s[key] = m
		}
		out = append(out, map[string]any{"$ref": "#/parameters/" + key})
	}
	return out
}

func paramsV3(params []parameter) []map[string]any {
	out := make([]map[string]any, 0, len(params))
	for _, p := range params {
		m := map[string]any{"name": p.name, "in": p.in, "schema": map[string]any{"type": p.typ, "uniqueItems": true}}
		if p.description != "" {
			m["description"] = p.description
		}
		if p.required {
			m["required"] = true
		}
		out = append(out, m)
	}
	return out
}
