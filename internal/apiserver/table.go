package apiserver

import (
	"bytes"
	"fmt"
	"net/url"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// defaultColumns are printed for resources without a printer, as upstream's default
// table convertor prints them.
var defaultColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name must be unique within a namespace."},
	{Name: "Created At", Type: "date", Description: "CreationTimestamp is a timestamp representing the server time when this object was created."},
}

// toTable renders objects as a Table for kubectl get. includeObject (None, Metadata,
// Object) says what each row carries besides its cells.
func (s *Server) toTable(h *resourceHandler, objs []runtime.Object, q url.Values, single bool) (*metav1.Table, error) {
	include := metav1.IncludeMetadata
	if q != nil {
		switch v := metav1.IncludeObjectPolicy(q.Get("includeObject")); v {
		case "":
		case metav1.IncludeNone, metav1.IncludeMetadata, metav1.IncludeObject:
			include = v
		default:
			return nil, apierrors.NewBadRequest(fmt.Sprintf("includeObject must be one of None, Metadata, Object; got %q", v))
		}
	}
	table := &metav1.Table{}
	if h.Printer != nil {
		table.ColumnDefinitions = h.Printer.Columns
	} else {
		table.ColumnDefinitions = defaultColumns
	}
	table.Rows = make([]metav1.TableRow, 0, len(objs))
	for _, obj := range objs {
		var cells []interface{}
		if h.Printer != nil {
			cells = h.Printer.Row(obj)
		} else {
			acc := accessor(obj)
			cells = []interface{}{acc.GetName(), acc.GetCreationTimestamp().UTC().Format(time.RFC3339)}
		}
		row := metav1.TableRow{Cells: cells}
		var embedded runtime.Object
		switch include {
		case metav1.IncludeMetadata:
			pom := toPartial(obj)
			setMetaKind(pom, "PartialObjectMetadata", "v1")
			embedded = pom
		case metav1.IncludeObject:
			embedded = obj
		}
		if embedded != nil {
			var buf bytes.Buffer
			if err := s.codecs.json.Encode(embedded, &buf); err != nil {
				return nil, err
			}
			row.Object = runtime.RawExtension{Raw: bytes.TrimSpace(buf.Bytes())}
		}
		table.Rows = append(table.Rows, row)
	}
	if single && len(objs) == 1 {
		acc := accessor(objs[0])
		table.ResourceVersion = acc.GetResourceVersion()
	}
	return table, nil
}
