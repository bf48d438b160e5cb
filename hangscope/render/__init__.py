

# The report formats, here so that the command line can list them without importing the
# renderers (rich and the report builders cost a cold dump tens of milliseconds).
FORMATS = ("text", "md", "json")
