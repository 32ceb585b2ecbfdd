package ops

import "encoding/json"

// MarshalJSON writes code, message and retryable, then the details as
// further members of the same object. A detail cannot replace one of the
// three required members.
func (b ErrorBody) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(b.Details)+3)
	for k, v := range b.Details {
		m[k] = v
	}
	m["code"] = b.Code
	m["message"] = b.Message
	m["retryable"] = b.Retryable
	return json.Marshal(m)
}

// UnmarshalJSON reads the three required members and keeps the rest in
// Details.
func (b *ErrorBody) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	var out ErrorBody
	for k, raw := range m {
		var err error
		switch k {
		case "code":
			err = json.Unmarshal(raw, &out.Code)
		case "message":
			err = json.Unmarshal(raw, &out.Message)
		case "retryable":
			err = json.Unmarshal(raw, &out.Retryable)
		default:
			var v any
			if err = json.Unmarshal(raw, &v); err == nil {
				if out.Details == nil {
					out.Details = map[string]any{}
				}
				out.Details[k] = v
			}
		}
		if err != nil {
			return err
		}
	}
	*b = out
	return nil
}
