package config

// LimitsSpec holds per-action limits.
type LimitsSpec struct {
	Email EmailLimits `yaml:"email.send"`
}

// EmailLimits bound email.send.
type EmailLimits struct {
	MaxRecipients  int      `yaml:"max_recipients"`
	AllowedDomains []string `yaml:"allowed_domains"`
	// InternalDomains are the organisation's own domains; recipients
	// elsewhere are counted in the route attribute external_recipients.
	InternalDomains []string `yaml:"internal_domains"`
	// MaxAttachments (default 5, at most 20) and MaxAttachmentBytes
	// (decoded, all files of one email together; default 5MiB, at most
	// 20MiB) bound attachments. The request body limit bounds them first.
	MaxAttachments     int      `yaml:"max_attachments"`
	MaxAttachmentBytes ByteSize `yaml:"max_attachment_bytes"`
}

// validateLimits checks the per-action limits.
func (f *File) validateLimits(bad func(string, ...any)) {
	if l := f.Limits.Email; l.MaxAttachments < 0 || l.MaxAttachments > 20 || l.MaxAttachmentBytes < 0 || l.MaxAttachmentBytes > 20<<20 {
		bad("limits: email.send: max_attachments must be 0-20 and max_attachment_bytes at most 20MiB")
	}
}
