"""A vyre backend. The plugin is ``vyre_template.backend`` (the entry point); this
package stays empty so that importing it opens nothing."""
